// Package region will hold the region server: it hosts regions of an
// engine volume as primary or backup and serves them over the rdma message
// protocol. It has no code yet.
package region
