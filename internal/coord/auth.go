package coord

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"
)

// ErrAuth: a ZooKeeper credential is malformed or could not be read, or
// ZooKeeper refused an operation to the session's (missing or wrong)
// credential (wrapping zk.ErrNoAuth then).
var ErrAuth = errors.New("coord: zookeeper credential missing, malformed or refused")

// parseAuth splits a digest credential "user:password". The user may not
// be empty or hold a colon; the password may not be empty.
func parseAuth(cred string) (user, password string, err error) {
	user, password, ok := strings.Cut(cred, ":")
	switch {
	case !ok:
		return "", "", fmt.Errorf("%w: want user:password", ErrAuth)
	case user == "":
		return "", "", fmt.Errorf("%w: the user is empty", ErrAuth)
	case password == "":
		return "", "", fmt.Errorf("%w: the password of %q is empty", ErrAuth, user)
	}
	return user, password, nil
}

// ReadAuthFile reads a credential file: "user:password" on one line
// (surrounding white space, the final newline included, is ignored). The
// credential is checked as Config.Auth is.
func ReadAuthFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrAuth, err)
	}
	cred := string(bytes.TrimSpace(b))
	if strings.ContainsAny(cred, "\r\n") {
		return "", fmt.Errorf("%w: %s: want one line, user:password", ErrAuth, path)
	}
	if _, _, err := parseAuth(cred); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return cred, nil
}

// aclFor is the ACL of every znode a session creates: full rights for the
// digest identity of cred only, or for anyone when cred is empty.
func aclFor(cred string) ([]zk.ACL, error) {
	if cred == "" {
		return zk.WorldACL(zk.PermAll), nil
	}
	user, password, err := parseAuth(cred)
	if err != nil {
		return nil, err
	}
	return zk.DigestACL(zk.PermAll, user, password), nil
}

// authenticate adds the session's digest credential (the library sends it
// again on every reconnection, before any other request), then warns if
// the root exists with an ACL other than the session's: znodes created
// before the credential was configured stay open to anyone.
func (s *Session) authenticate(ctx context.Context, cred string) error {
	if cred == "" {
		return nil
	}
	err := s.retry(ctx, func() error { return s.conn.AddAuth("digest", []byte(cred)) })
	if err != nil {
		return fmt.Errorf("coord: zookeeper authentication: %w", err)
	}
	var acl []zk.ACL
	err = s.retry(ctx, func() (err error) {
		acl, _, err = s.conn.GetACL(s.root)
		return err
	})
	switch {
	case errors.Is(err, zk.ErrNoNode):
	case err != nil:
		s.log.Warn("cannot read the ACL of the root", zap.String("root", s.root), zap.Error(err))
	case !sameACL(acl, s.acl):
		s.log.Warn("the root's ACL is not the credential's: znodes created without it are open (docs/operations.md, \"ZooKeeper ACLs\")",
			zap.String("root", s.root), zap.Any("acl", acl))
	}
	return nil
}

func sameACL(a, b []zk.ACL) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// SetTreeACL sets the session's ACL (Config.Auth's identity only, or
// anyone's without a credential) on the root and every znode under it,
// parents first, and returns how many it set. It is how a cluster created
// without a credential is closed; znodes created meanwhile by others may
// be missed, so every member should be stopped. A znode whose ACL this
// session may not change fails it with ErrAuth (and zk.ErrNoAuth).
func (s *Session) SetTreeACL(ctx context.Context) (int, error) {
	n := 0
	var walk func(p string) error
	walk = func(p string) error {
		err := s.retry(ctx, func() error {
			_, err := s.conn.SetACL(p, s.acl, -1)
			return err
		})
		if errors.Is(err, zk.ErrNoNode) {
			return nil // gone meanwhile
		}
		if err != nil {
			return fmt.Errorf("coord: set the acl of %s: %w", p, err)
		}
		n++
		var kids []string
		err = s.retry(ctx, func() (err error) {
			kids, _, err = s.conn.Children(p)
			return err
		})
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("coord: list %s: %w", p, err)
		}
		for _, k := range kids {
			if err := walk(path.Join(p, k)); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(s.root); err != nil {
		return n, err
	}
	return n, nil
}
