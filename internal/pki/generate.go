package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Dev describes a development cluster's certificates.
type Dev struct {
	Dir   string   // where the files go (created if missing)
	Hosts []string // one server certificate per entry: a DNS name or an IP address
	// Validity is how long the certificates are valid (default 1 year),
	// from Now (default the current time).
	Validity time.Duration
	Now      time.Time
}

// File names in Dev.Dir: the CA, each host's server certificate (its
// name followed by .crt and .key) and the client certificate.
const (
	CACert     = "ca.crt"
	CAKey      = "ca.key"
	ClientCert = "client.crt"
	ClientKey  = "client.key"
)

// ServerFiles are host's files in dir, trusting the CA there.
func ServerFiles(dir, host string) Files {
	base := filepath.Join(dir, "server-"+host)
	return Files{Cert: base + ".crt", Key: base + ".key", CA: filepath.Join(dir, CACert)}
}

// ClientFiles are the client's files in dir, trusting the CA there.
func ClientFiles(dir string) Files {
	return Files{Cert: filepath.Join(dir, ClientCert), Key: filepath.Join(dir, ClientKey), CA: filepath.Join(dir, CACert)}
}

// Generate makes a CA (ECDSA P-256), a server certificate for each host
// (its one SAN the host; usable as a client certificate too, for
// replication between servers) and a client certificate, all signed by
// the CA, and returns the paths written. Keys are written 0600. It
// refuses to overwrite a file.
func (d Dev) Generate() ([]string, error) {
	if len(d.Hosts) == 0 {
		return nil, fmt.Errorf("%w: no hosts", ErrCert)
	}
	for _, h := range d.Hosts {
		if h == "" || strings.ContainsAny(h, `/\`) || h == "." || h == ".." {
			return nil, fmt.Errorf("%w: host %q: want a DNS name or an IP address", ErrCert, h)
		}
	}
	if d.Validity <= 0 {
		d.Validity = 365 * 24 * time.Hour
	}
	if d.Now.IsZero() {
		d.Now = time.Now()
	}
	if err := os.MkdirAll(d.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCert, err)
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	ca := d.template("tebis dev CA")
	ca.IsCA, ca.BasicConstraintsValid = true, true
	ca.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	if ca, err = x509.ParseCertificate(caDER); err != nil {
		return nil, err
	}
	var written []string
	write := func(name string, der []byte, key *ecdsa.PrivateKey) error {
		p, err := writePEM(filepath.Join(d.Dir, name+".crt"), "CERTIFICATE", der, 0o644)
		if err != nil {
			return err
		}
		written = append(written, p)
		kb, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return err
		}
		if p, err = writePEM(filepath.Join(d.Dir, name+".key"), "PRIVATE KEY", kb, 0o600); err != nil {
			return err
		}
		written = append(written, p)
		return nil
	}
	if err := write(strings.TrimSuffix(CACert, ".crt"), caDER, caKey); err != nil {
		return written, err
	}
	for _, h := range d.Hosts {
		tmpl := d.template(h)
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = []net.IP{ip}
		} else {
			tmpl.DNSNames = []string{h}
		}
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
		der, key, err := sign(tmpl, ca, caKey)
		if err == nil {
			err = write("server-"+h, der, key)
		}
		if err != nil {
			return written, err
		}
	}
	tmpl := d.template("tebis client")
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	der, key, err := sign(tmpl, ca, caKey)
	if err == nil {
		err = write(strings.TrimSuffix(ClientCert, ".crt"), der, key)
	}
	return written, err
}

// template is a certificate for name valid over d's period, with a
// random serial number.
func (d Dev) template(name string) *x509.Certificate {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name, Organization: []string{"tebis dev cluster"}},
		NotBefore:    d.Now.Add(-time.Hour),
		NotAfter:     d.Now.Add(d.Validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
}

// sign makes a key and its certificate from tmpl, signed by ca.
func sign(tmpl, ca *x509.Certificate, caKey *ecdsa.PrivateKey) ([]byte, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	return der, key, err
}

// writePEM writes one PEM block to a new file of mode perm.
func writePEM(path, kind string, der []byte, perm os.FileMode) (string, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return "", fmt.Errorf("%w: %s exists: not overwritten", ErrCert, path)
		}
		return "", fmt.Errorf("%w: %w", ErrCert, err)
	}
	err = pem.Encode(f, &pem.Block{Type: kind, Bytes: der})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return "", fmt.Errorf("%w: %s: %w", ErrCert, path, err)
	}
	return path, nil
}
