package pki

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// ErrCert: certificate files are missing, unreadable or do not parse.
var ErrCert = errors.New("pki: bad certificate files")

// Files names one party's PEM files: its certificate, its private key and
// the certificate authority it trusts.
type Files struct {
	Cert, Key, CA string
}

// Set says whether any file is named.
func (f Files) Set() bool { return f.Cert != "" || f.Key != "" || f.CA != "" }

// Check fails unless all three files or none are named.
func (f Files) Check() error {
	if f.Set() && (f.Cert == "" || f.Key == "" || f.CA == "") {
		return fmt.Errorf("%w: a certificate, its key and a CA are needed together (cert %q, key %q, ca %q)", ErrCert, f.Cert, f.Key, f.CA)
	}
	return nil
}

// Load reads the files into a configuration for both ends of a mutually
// authenticated TLS 1.3 connection: it presents the certificate, verifies
// servers against the CA (RootCAs) and requires clients to present a
// certificate the CA signed (ClientAuth, ClientCAs). Load of no files is
// nil, nil: plaintext.
func Load(f Files) (*tls.Config, error) {
	if err := f.Check(); err != nil || !f.Set() {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("%w: %s, %s: %w", ErrCert, f.Cert, f.Key, err)
	}
	pem, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCert, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%w: %s holds no PEM certificate", ErrCert, f.CA)
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		RootCAs:      pool,
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
	}, nil
}
