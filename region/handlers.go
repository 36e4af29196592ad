package region

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/engine"
	"github.com/tebis-go/tebis/internal/wire"
	"github.com/tebis-go/tebis/rdma"
	"github.com/tebis-go/tebis/rdma/ring"
	"github.com/tebis-go/tebis/replication"
)

func (s *Server) handlers() map[uint16]ring.HandlerFunc {
	return map[uint16]ring.HandlerFunc{
		wire.TypePut:      s.measured(opPut, s.handlePut),
		wire.TypeGet:      s.measured(opGet, s.leased(s.handleGet)),
		wire.TypeDelete:   s.measured(opDelete, s.handleDelete),
		wire.TypeScan:     s.measured(opScan, s.leased(s.handleScan)),
		wire.TypeMultiGet: s.measured(opMultiGet, s.leased(s.handleMultiGet)),
		wire.TypeStats:    s.measured(opStats, s.handleStats),
	}
}

// shortHandlers are the requests tried on the rings' spinners first
// (ring.ServerConfig.Short): gets whose reads do not wait, and puts that
// do not (tryPut).
func (s *Server) shortHandlers() map[uint16]ring.ShortFunc {
	return map[uint16]ring.ShortFunc{
		wire.TypeGet: s.measuredShort(opGet, s.leasedShort(s.tryGet)),
		wire.TypePut: s.measuredShort(opPut, s.tryPut),
	}
}

func errorReply(status uint16, format string, a ...any) ring.Reply {
	return ring.Reply{Status: status, Payload: fmt.Appendf(nil, format, a...)}
}

func badRequest(err error) ring.Reply { return errorReply(wire.StatusBadRequest, "%v", err) }

// route finds the hosted region a request is for, or the reply refusing it:
// WRONG_REGION when the client's map version differs from the server's, or
// the region is not this server's, or the key is outside it; UNAVAILABLE
// when the region is being handed over or attached, or the server's read
// lease does not hold (lease.go).
func (s *Server) route(h *ring.ServerRequest, version uint64) (*engine.Region, *regionmap.Assignment, *ring.Reply) {
	er, mr, rej := s.routeUncounted(h, version)
	if rej == nil {
		s.ops.add(h.Region)
	}
	return er, mr, rej
}

// routeUncounted is route without counting the request in the region's
// rate (status.go): a request that may yet be handed over counts once.
func (s *Server) routeUncounted(h *ring.ServerRequest, version uint64) (*engine.Region, *regionmap.Assignment, *ring.Reply) {
	st := s.state.Load()
	wrong := func() *ring.Reply {
		return &ring.Reply{Status: wire.StatusWrongRegion, Payload: wire.EncodeVersion(st.m.Version)}
	}
	if s.closed.Load() {
		r := errorReply(wire.StatusUnavailable, "server %s is shutting down", s.cfg.Name)
		return nil, nil, &r
	}
	if version != st.m.Version {
		return nil, nil, wrong()
	}
	mr := st.region(h.Region)
	rt := st.routes[h.Region]
	if mr != nil && mr.Primary == s.cfg.Name && mr.MoveTo != "" {
		// Released for a move: the map's own route, unavailable until the
		// next map names the new primary (WRONG_REGION at the client's
		// version would have it give up).
		r := errorReply(wire.StatusUnavailable, "region %d: its primary role is moving from %s to %s", h.Region, s.cfg.Name, mr.MoveTo)
		return nil, nil, &r
	}
	if rt.how == routeWithdrawn {
		r := errorReply(wire.StatusUnavailable, "region %d: no longer served by %s (handed over)", h.Region, s.cfg.Name)
		return nil, nil, &r
	}
	if rt.how == routeIncomplete {
		r := errorReply(wire.StatusUnavailable, "region %d: %s holds an incomplete copy (it backed the region up and restarted): waiting for a server with a complete one", h.Region, s.cfg.Name)
		return nil, nil, &r
	}
	if mr == nil || rt.er == nil {
		return nil, nil, wrong()
	}
	if !s.leaseHolds() {
		r := s.noLease()
		return nil, nil, &r
	}
	if rt.how == routeAttaching {
		r := errorReply(wire.StatusUnavailable, "region %d: connecting to its backups", h.Region)
		return nil, nil, &r
	}
	return rt.er, mr, nil
}

// checkKey validates a key against the limits and the region.
func (s *Server) checkKey(mr *regionmap.Assignment, key []byte) *ring.Reply {
	// Each refusal makes its own reply: a reply declared for them all
	// would be allocated for every key that passes too.
	switch {
	case len(key) == 0:
		r := errorReply(wire.StatusBadRequest, "empty key")
		return &r
	case len(key) > int(s.cfg.MaxKeySize):
		r := errorReply(wire.StatusTooLarge, "key of %d bytes, limit %d", len(key), s.cfg.MaxKeySize)
		return &r
	case !mr.Contains(key):
		return &ring.Reply{Status: wire.StatusWrongRegion, Payload: wire.EncodeVersion(s.state.Load().m.Version)}
	}
	return nil
}

// engineReply maps an engine error to a reply.
func engineReply(err error) ring.Reply {
	switch {
	case errors.Is(err, engine.ErrNotFound):
		return ring.Reply{Status: wire.StatusNotFound}
	case errors.Is(err, engine.ErrKeyTooLarge), errors.Is(err, engine.ErrValueTooLarge):
		return errorReply(wire.StatusTooLarge, "%v", err)
	case errors.Is(err, engine.ErrEmptyKey), errors.Is(err, engine.ErrOutOfRange),
		errors.Is(err, engine.ErrBadRequestID), errors.Is(err, engine.ErrStaleRequest):
		return errorReply(wire.StatusBadRequest, "%v", err)
	case errors.Is(err, engine.ErrClosed), errors.Is(err, replication.ErrNoBackups), errors.Is(err, replication.ErrBackupDropped),
		errors.Is(err, replication.ErrStreamClosed), errors.Is(err, replication.ErrTooFewCopies),
		errors.Is(err, rdma.ErrClosed), errors.Is(err, rdma.ErrPeerGone):
		// A connection of the region's stream closed or its peer died:
		// the write is not known to be held; the next primary answers.
		return errorReply(wire.StatusUnavailable, "%v", err)
	case isStorageErr(err):
		return errorReply(wire.StatusStorage, "storage: %v", err)
	}
	return errorReply(wire.StatusInternal, "%v", err)
}

func (s *Server) handlePut(req *ring.ServerRequest) ring.Reply {
	q, err := wire.DecodePutRequest(req.Payload)
	if err != nil {
		return badRequest(err)
	}
	er, mr, rej := s.route(req, q.MapVersion)
	if rej == nil {
		rej = s.admitPut(mr, q)
	}
	if rej != nil {
		return *rej
	}
	if er.WritesWait() {
		req.WillBlock() // a group commit or the backups: requests queued behind it go to another worker
	}
	// A put the region applied already (a client's retry) is not applied
	// again: it is acknowledged once the original is (engine.PutOnce).
	if err := labeledErr(labelInsert, func() error {
		_, err := er.PutOnce(q.Key, q.Value, engine.RequestID(q.ID))
		return err
	}); err != nil {
		return s.engineErr(err)
	}
	return ring.Reply{}
}

// admitPut is the refusal of a routed put before the engine sees it: a
// key outside the region, a value over the limit, a disk that cannot
// store it (health.go); nil admits it.
func (s *Server) admitPut(mr *regionmap.Assignment, q wire.PutRequest) *ring.Reply {
	if rej := s.checkKey(mr, q.Key); rej != nil {
		return rej
	}
	if len(q.Value) > int(s.cfg.MaxValueSize) {
		r := errorReply(wire.StatusTooLarge, "value of %d bytes, limit %d", len(q.Value), s.cfg.MaxValueSize)
		return &r
	}
	return s.refuseWrite()
}

// tryPut is handlePut on the ring's spinner (ring.ShortFunc): a put the
// engine applies without waiting before its append (engine.TryPutOnce:
// room in L0 and the log tail, a replication stream's lock free) is
// answered from the spinner, at once when nothing is to be waited for
// (async mode, a lone primary with unsafe lone acks, backups that hold it
// as soon as its WRITEs are posted: engine.TryAcknowledger), else by the
// region's acknowledger once its group commit or its backups hold it
// (ring.Later): no worker waits meanwhile. The rest is declined, having
// changed nothing, to a worker.
func (s *Server) tryPut(req *ring.ServerRequest) (ring.Reply, bool) {
	q, err := wire.DecodePutRequest(req.Payload)
	if err != nil {
		return badRequest(err), true
	}
	er, mr, rej := s.routeUncounted(req, q.MapVersion)
	if rej != nil {
		return *rej, true
	}
	// Routed: counted in the region's rate, as route counts a worker's.
	answer := func(rep ring.Reply) (ring.Reply, bool) {
		s.ops.add(req.Region)
		return rep, true
	}
	if rej := s.admitPut(mr, q); rej != nil {
		return answer(*rej)
	}
	if er.WritesWait() && !req.CanReplyLater() {
		// A reply from the acknowledger could wait for this client (a
		// tcp client whose reply ring outgrows the transport's queue),
		// and every acknowledgement of the region with it.
		return ring.Reply{}, false
	}
	p := putAckPool.Get().(*putAck)
	p.s, p.later, p.region, p.start = s, req.Later(), req.Region, arrived(req)
	var ok, waits bool
	err = labeledErrOn(labelInsert, labelPoll, func() error {
		var err error
		ok, waits, err = er.TryPutOnce(q.Key, q.Value, engine.RequestID(q.ID), p.done)
		return err
	})
	switch {
	case !ok:
		p.free()
		return ring.Reply{}, false
	case !waits:
		p.done(err) // now, on the spinner
	}
	return answer(ring.Reply{}) // the reply is later's: the spinner sends nothing
}

// putAck is a put taken on a spinner until its reply is sent; pooled,
// with done bound once, so a put costs no allocation.
type putAck struct {
	s      *Server
	later  ring.Later
	region uint64
	start  time.Time
	done   func(error) // replies with the put's outcome, then frees the putAck
}

var putAckPool sync.Pool

func init() { putAckPool.New = newPutAck }

func newPutAck() any {
	p := &putAck{}
	p.done = func(err error) {
		rep := ring.Reply{}
		if err != nil {
			rep = p.s.engineErr(err)
		}
		p.s.observe(opPut, p.region, rep.Status, time.Since(p.start))
		p.later.Reply(rep)
		p.free()
	}
	return p
}

func (p *putAck) free() {
	p.s, p.later = nil, ring.Later{}
	putAckPool.Put(p)
}

// keyRequest decodes and routes a get.
func (s *Server) keyRequest(req *ring.ServerRequest) (*engine.Region, []byte, *ring.Reply) {
	q, err := wire.DecodeKeyRequest(req.Payload)
	if err != nil {
		r := badRequest(err)
		return nil, nil, &r
	}
	er, mr, rej := s.route(req, q.MapVersion)
	if rej == nil {
		rej = s.checkKey(mr, q.Key)
	}
	return er, q.Key, rej
}

func (s *Server) handleGet(req *ring.ServerRequest) ring.Reply {
	er, key, rej := s.keyRequest(req)
	if rej != nil {
		return *rej
	}
	req.WillBlock() // on a worker, a get waits for its L0 hit's group commit or backups (tryGet)
	v, err := er.Get(key)
	if err != nil {
		return s.engineErr(err)
	}
	return ring.Reply{Payload: v}
}

// tryGet is handleGet on the ring's spinner (ring.ShortFunc): it answers
// unless the engine would wait (an L0 hit not yet acknowledged-grade,
// engine.Region.TryGet), which it leaves to handleGet on a worker, having
// changed nothing. Routing refusals and errors are answered here.
func (s *Server) tryGet(req *ring.ServerRequest) (ring.Reply, bool) {
	q, err := wire.DecodeKeyRequest(req.Payload)
	if err != nil {
		return badRequest(err), true
	}
	er, mr, rej := s.routeUncounted(req, q.MapVersion)
	if rej == nil {
		rej = s.checkKey(mr, q.Key)
	}
	if rej != nil {
		return *rej, true
	}
	// The value is read into the spinner's scratch: the reply aliasing it
	// is written to the client's ring before the spinner's next request.
	v, ok, err := er.TryGetInto(q.Key, req.Scratch)
	if !ok {
		return ring.Reply{}, false
	}
	s.ops.add(req.Region)
	if err != nil {
		return s.engineErr(err), true
	}
	return ring.Reply{Payload: v}, true
}

func (s *Server) handleDelete(req *ring.ServerRequest) ring.Reply {
	q, err := wire.DecodeDeleteRequest(req.Payload)
	if err != nil {
		return badRequest(err)
	}
	er, mr, rej := s.route(req, q.MapVersion)
	if rej == nil {
		rej = s.checkKey(mr, q.Key)
	}
	if rej != nil {
		return *rej
	}
	if rej := s.refuseWrite(); rej != nil {
		return *rej
	}
	if er.WritesWait() {
		req.WillBlock() // a group commit or the backups: requests queued behind it go to another worker
	}
	// Exactly once, like a put.
	if err := labeledErr(labelInsert, func() error {
		_, err := er.DeleteOnce(q.Key, engine.RequestID(q.ID))
		return err
	}); err != nil {
		return s.engineErr(err)
	}
	return ring.Reply{}
}

// maxReply is the largest reply a request's client can take (unknown:
// what the largest ring can): scans and multi-gets build no more.
func maxReply(req *ring.ServerRequest) int {
	if req.MaxReply > 0 {
		return req.MaxReply
	}
	return ring.MaxPayload(ring.MaxRing)
}

// handleScan returns pairs from max(start, region start) to the lesser of
// the requested end and the region's end, at most Limit pairs and about
// MaxBytes of encoded reply, MaxBytes capped at what the client's reply
// ring can take (always at least one pair).
func (s *Server) handleScan(req *ring.ServerRequest) ring.Reply {
	q, err := wire.DecodeScanRequest(req.Payload)
	if err != nil {
		return badRequest(err)
	}
	er, mr, rej := s.route(req, q.MapVersion)
	if rej != nil {
		return *rej
	}
	start := q.Start
	if bytes.Compare(start, []byte(mr.Start)) < 0 {
		start = []byte(mr.Start)
	}
	if len(start) > 0 && !mr.Contains(start) {
		return ring.Reply{Status: wire.StatusWrongRegion, Payload: wire.EncodeVersion(s.state.Load().m.Version)}
	}
	end, toRegionEnd := q.End, false
	if mr.End != "" && (len(end) == 0 || bytes.Compare(end, []byte(mr.End)) >= 0) {
		end, toRegionEnd = []byte(mr.End), true
	}
	if len(start) == 0 {
		start = nil
	}
	if len(end) == 0 {
		end = nil
	}
	limit := int(q.Limit)
	if limit <= 0 {
		limit = 1
	}
	maxBytes := min(int(q.MaxBytes), maxReply(req))
	it := er.Scan(start, end)
	defer it.Close()
	var pairs []wire.Pair
	size, flags := 5, uint8(0)
	for it.Next() {
		n := 8 + len(it.Key()) + len(it.Value())
		if len(pairs) >= limit || (len(pairs) > 0 && size+n > maxBytes) {
			flags = wire.ScanMore
			break
		}
		pairs = append(pairs, wire.Pair{Key: bytes.Clone(it.Key()), Value: bytes.Clone(it.Value())})
		size += n
	}
	if err := it.Err(); err != nil {
		return s.engineErr(err)
	}
	if flags == 0 && toRegionEnd {
		flags = wire.ScanRegionEnd
	}
	return ring.Reply{Payload: wire.EncodeScanReply(nil, flags, pairs)}
}

// handleMultiGet answers every key's value, or TOO_LARGE once the reply
// grows past what the client's reply ring can take (the client splits
// the batch).
func (s *Server) handleMultiGet(req *ring.ServerRequest) ring.Reply {
	q, err := wire.DecodeMultiGetRequest(req.Payload)
	if err != nil {
		return badRequest(err)
	}
	er, mr, rej := s.route(req, q.MapVersion)
	if rej != nil {
		return *rej
	}
	var out []byte
	for _, k := range q.Keys {
		if rej := s.checkKey(mr, k); rej != nil {
			return *rej
		}
		v, err := er.Get(k)
		switch {
		case errors.Is(err, engine.ErrNotFound):
			out = wire.EncodeMultiGetValue(out, nil, false)
		case err != nil:
			return s.engineErr(err)
		default:
			out = wire.EncodeMultiGetValue(out, v, true)
		}
		if len(out) > maxReply(req) {
			return errorReply(wire.StatusTooLarge, "multi-get of %d keys: reply over %d bytes, the most the client's reply ring takes", len(q.Keys), maxReply(req))
		}
	}
	return ring.Reply{Payload: out}
}

// labeledErr runs f under label (CPU profiles split by component), then
// puts back the ring worker's label.
func labeledErr(label context.Context, f func() error) error {
	return labeledErrOn(label, labelWorker, f)
}

// labeledErrOn is labeledErr on a goroutine whose own label is home.
func labeledErrOn(label, home context.Context, f func() error) error {
	pprof.SetGoroutineLabels(label)
	defer pprof.SetGoroutineLabels(home)
	return f()
}

// The pprof label sets component=NAME that labeledErr puts on a worker,
// built once (a label set per request costs allocations on every put);
// labelWorker is the one rdma/ring gives its worker goroutines.
var (
	labelWorker         = componentLabel("ring-reply")
	labelPoll           = componentLabel("ring-poll") // rdma/ring's spinners
	labelInsert         = componentLabel("insert")
	labelRewriteIndex   = componentLabel("rewrite-index")
	labelLogReplication = componentLabel("log-replication")
)

func componentLabel(name string) context.Context {
	return pprof.WithLabels(context.Background(), pprof.Labels("component", name))
}
