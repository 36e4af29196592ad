// Package pki loads the TLS configuration of the tcp transport from
// certificate files, and makes a local certificate authority with server
// and client certificates for a development cluster (`tebis certs`).
package pki
