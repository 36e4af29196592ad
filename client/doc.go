// Package client will hold the Go client library of tebis. It has no code
// yet.
package client
