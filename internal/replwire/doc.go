// Package replwire is the byte encoding of server-to-server replication
// (docs/protocol.md): the commands a primary sends a backup (Command),
// their payloads (State, RebasePair, Applied, key/value pairs), the hello
// of a primary's connection request (Hello), the tail marker at the head
// of a backup's buffer half (Marker) and the encoding of a segment map.
// Decoders refuse what does not decode (ErrMalformed, ErrBadEncoding)
// and never panic on any input. Package replication applies these
// messages; package region carries them.
package replwire
