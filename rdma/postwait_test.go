package rdma

import "testing"

// otherQP is a QP PostsWithoutWaiting does not know (a wrapper).
type otherQP struct{ QP }

// TestPostsWithoutWaiting: shm and loopback never wait; tcp does not
// while what its peer may leave unread, frames included, fits its queue;
// an unknown QP may.
func TestPostsWithoutWaiting(t *testing.T) {
	tcp := &tcpQP{t: &TCP{MaxQueued: 1000}}
	for _, tc := range []struct {
		name string
		q    QP
		n, k int
		want bool
	}{
		{"shm", &shmQP{}, 64 << 20, 1 << 20, true},
		{"loopback", &loopQP{}, 64 << 20, 1 << 20, true},
		{"tcp, fits", tcp, 1000 - 3*frameHeader, 3, true},
		{"tcp, frames overflow", tcp, 1000 - 3*frameHeader, 4, false},
		{"tcp, bytes overflow", tcp, 1001, 0, false},
		{"tcp, default queue", &tcpQP{t: &TCP{}}, 256 << 10, 4096, true},
		{"unknown", otherQP{}, 64, 1, false},
	} {
		if got := PostsWithoutWaiting(tc.q, tc.n, tc.k); got != tc.want {
			t.Errorf("%s: PostsWithoutWaiting(%d bytes, %d writes) = %v, want %v", tc.name, tc.n, tc.k, got, tc.want)
		}
	}
}
