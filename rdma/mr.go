package rdma

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ctlSize is the control page in front of every region's memory: the
// region's current key (0 once deregistered) and its length, read by
// writers in other processes (shm) before they copy.
const ctlSize = 4096

// MR is a registered memory region: len bytes off the Go heap, in a memfd
// mapping that the shm transport can share with peers. An MR is safe for
// concurrent use; its bytes are whatever peers and the owner put there (the
// owner synchronizes with peers through its protocol, e.g. LoadWord).
type MR struct {
	mapping []byte // control page + memory
	buf     []byte
	fd      int
	addr    uint64
	key     uint32
	dead    atomic.Bool
	pins    sync.RWMutex // read-held while bytes are copied in or out
}

// RemoteMR names a peer's region: what the peer passes at connection set-up
// and what a WRITE addresses.
type RemoteMR struct {
	Addr uint64 // base address as the owner names it
	Key  uint32
	Len  uint64
}

var (
	nextAddr atomic.Uint64 // region ids; address = id << 32
	regions  sync.Map      // addr -> *MR: the process's region table
)

// MaxMRSize bounds one region (offsets are 32-bit in addresses).
const MaxMRSize = 1 << 31

// Register allocates and registers a zeroed region of n bytes.
func Register(n int) (*MR, error) {
	if n <= 0 || n > MaxMRSize {
		return nil, fmt.Errorf("rdma: register %d bytes: size out of range (1..%d)", n, MaxMRSize)
	}
	fd, m, err := mapShared(ctlSize + n)
	if err != nil {
		return nil, err
	}
	key := rand.Uint32() | 1 // never 0: 0 marks a deregistered region
	mr := &MR{mapping: m, buf: m[ctlSize:], fd: fd, addr: nextAddr.Add(1) << 32, key: key}
	ctlLen(m).Store(uint64(n))
	ctlKey(m).Store(key)
	regions.Store(mr.addr, mr)
	return mr, nil
}

// mapShared makes a sealed-size memfd of n bytes and maps it shared. The
// seals let a peer that maps it trust its size (no SIGBUS from a shrink).
func mapShared(n int) (int, []byte, error) {
	fd, err := unix.MemfdCreate("tebis-mr", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return -1, nil, fmt.Errorf("rdma: memfd_create: %w", err)
	}
	if err := unix.Ftruncate(fd, int64(n)); err != nil {
		unix.Close(fd)
		return -1, nil, fmt.Errorf("rdma: size region: %w", err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		unix.Close(fd)
		return -1, nil, fmt.Errorf("rdma: seal region: %w", err)
	}
	m, err := unix.Mmap(fd, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return -1, nil, fmt.Errorf("rdma: mmap region: %w", err)
	}
	return fd, m, nil
}

// mapPeer maps a memfd a peer sent, after checking its size is sealed.
func mapPeer(fd int) ([]byte, error) {
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil || seals&unix.F_SEAL_SHRINK == 0 {
		return nil, fmt.Errorf("%w: peer region is not size-sealed", ErrProtocol)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("rdma: stat peer region: %w", err)
	}
	if st.Size < ctlSize || st.Size > ctlSize+MaxMRSize {
		return nil, fmt.Errorf("%w: peer region of %d bytes", ErrProtocol, st.Size)
	}
	m, err := unix.Mmap(fd, 0, int(st.Size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("rdma: mmap peer region: %w", err)
	}
	return m, nil
}

func ctlKey(m []byte) *atomic.Uint32 { return (*atomic.Uint32)(unsafe.Pointer(&m[0])) }
func ctlLen(m []byte) *atomic.Uint64 { return (*atomic.Uint64)(unsafe.Pointer(&m[8])) }

// Bytes is the region's memory. It stays valid until Deregister.
func (m *MR) Bytes() []byte { return m.buf }

// Len is the region's size.
func (m *MR) Len() int { return len(m.buf) }

// Remote is the descriptor peers use to WRITE into the region.
func (m *MR) Remote() RemoteMR { return RemoteMR{Addr: m.addr, Key: m.key, Len: uint64(len(m.buf))} }

// Revoke fences the region off: every later WRITE fails with ErrAccess,
// and a WRITE that a peer saw complete successfully landed before Revoke
// returned (shm writers check the key again after their copy; the other
// transports' copies in progress are waited for). The memory stays
// readable until Deregister. A backup revokes its log buffer before it
// reads it to take over from a primary that may still be running.
func (m *MR) Revoke() {
	if m.dead.Load() {
		return
	}
	ctlKey(m.mapping).Store(0)
	m.pins.Lock()
	m.pins.Unlock() //nolint:staticcheck // waits out copies that pinned the region before the store
}

// View calls fn with the region's memory while no WRITE of this process
// copies into it (loopback and tcp copies wait; shm WRITEs come from other
// processes and are not held). fn must not keep the slice. It returns
// false, without calling fn, once the region is deregistered.
func (m *MR) View(fn func(b []byte)) bool {
	m.pins.Lock()
	defer m.pins.Unlock()
	if m.dead.Load() {
		return false
	}
	fn(m.buf)
	return true
}

// Deregister revokes the key (later WRITEs fail with ErrAccess) and
// unmaps the region. Peers that mapped it (shm) keep their mapping, so a
// WRITE racing with Deregister lands in memory nobody reads.
func (m *MR) Deregister() error {
	if m.dead.Swap(true) {
		return nil
	}
	ctlKey(m.mapping).Store(0)
	regions.Delete(m.addr)
	// Wait for copies in progress (pins taken before dead was set).
	m.pins.Lock()
	defer m.pins.Unlock()
	err := unix.Munmap(m.mapping)
	if cerr := unix.Close(m.fd); err == nil {
		err = cerr
	}
	return err
}

// pin keeps the region mapped until unpin; it fails once the region is
// deregistered.
func (m *MR) pin() bool {
	m.pins.RLock()
	if m.dead.Load() {
		m.pins.RUnlock()
		return false
	}
	return true
}

func (m *MR) unpin() { m.pins.RUnlock() }

// lookupMR finds a live local region by address.
func lookupMR(addr uint64) (*MR, bool) {
	v, ok := regions.Load(addr)
	if !ok {
		return nil, false
	}
	mr := v.(*MR)
	return mr, !mr.dead.Load()
}

// target returns the bytes a WRITE of n bytes at off into r may touch, or
// ErrAccess. keyNow is the region's current key.
func target(buf []byte, keyNow uint32, r RemoteMR, off uint64, n int) ([]byte, error) {
	if keyNow == 0 || keyNow != r.Key || off > uint64(len(buf)) || uint64(n) > uint64(len(buf))-off {
		return nil, ErrAccess
	}
	return buf[off : off+uint64(n)], nil
}

// publish copies src into dst so that the last 8-byte word of dst, when
// 8-aligned, becomes visible after every other byte: the bulk is copied
// first, then the last word is written with an atomic (release) store. A
// WRITE that does not end on an aligned word ends with a store fence.
func publish(dst, src []byte) {
	n := len(src)
	if n >= 8 && uintptr(unsafe.Pointer(&dst[n-8]))%8 == 0 {
		copy(dst[:n-8], src[:n-8])
		w := *(*uint64)(unsafe.Pointer(&src[n-8]))
		atomic.StoreUint64((*uint64)(unsafe.Pointer(&dst[n-8])), w)
		return
	}
	copy(dst, src)
	fence.Add(1)
}

var fence atomic.Uint64

// LoadWord atomically loads the 8-byte word at off (8-aligned) of b, as a
// little-endian value. Pollers use it on the word a message ends with.
func LoadWord(b []byte, off int) uint64 {
	w := atomic.LoadUint64((*uint64)(unsafe.Pointer(&b[off])))
	return leWord(w)
}

// StoreWord atomically stores v, little-endian, at off (8-aligned) of b.
func StoreWord(b []byte, off int, v uint64) {
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&b[off])), leWord(v))
}

func isAligned8(b []byte) bool { return uintptr(unsafe.Pointer(&b[0]))%8 == 0 }
