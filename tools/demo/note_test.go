package demo

import (
	"strings"
	"testing"
)

func TestTransportNote(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{nil, "plaintext tcp on 127.0.0.1"},
		{[]string{"--workers", "4"}, "plaintext tcp on 127.0.0.1"},
		{[]string{"--tls-cert", "s.crt", "--tls-key", "s.key", "--tls-ca", "ca.crt"}, "with TLS"},
		{[]string{"--tls-cert=s.crt"}, "with TLS"},
	}
	for _, c := range cases {
		if got := transportNote(c.args); !strings.Contains(got, c.want) {
			t.Errorf("transportNote(%q) = %q, want it to say %q", c.args, got, c.want)
		}
	}
}
