package torture

import (
	"bytes"
	"context"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tebis-go/tebis/client"
)

// setValueSize is the size of a set element's value.
const setValueSize = 1000

// setState is what the writers know of one element.
type setState uint8

const (
	setInsertUnknown setState = iota + 1 // its insert failed: present or not
	setInserted                          // its insert was acknowledged
	setDeleteUnknown                     // acknowledged, then its delete failed
	setDeleted                           // its delete was acknowledged
)

// setLoad is the set workload (Jepsen's set, with deletes): writers insert
// unique keys and, after every deleteEvery-th insert, delete the element
// just inserted or an older one of theirs. After the run a full scan must find every
// acknowledged insert not deleted (else lost), no key never inserted and
// no value never written (else unexpected), and no acknowledged delete's
// key (else resurrected).
type setLoad struct {
	rec         *recorder
	rate        int // inserts per second, all writers together
	deleteEvery int

	mu    sync.Mutex
	elems map[string]setState
}

// setKey is writer w's element seq, spread over every region.
func setKey(w, seq int) string {
	return fmt.Sprintf("k%d.set.%02d.%09d", (w+seq)%10, w, seq)
}

// setValue is the value an element's insert writes.
func setValue(key string) []byte {
	v := bytes.Repeat([]byte{'v'}, setValueSize)
	copy(v, fmt.Sprintf("%s|%08x|", key, crc32.ChecksumIEEE([]byte(key))))
	return v
}

func (s *setLoad) set(key string, st setState) {
	s.mu.Lock()
	s.elems[key] = st
	s.mu.Unlock()
}

// run runs writer w (of writers) until ctx ends, at rate/writers inserts a
// second.
func (s *setLoad) run(ctx context.Context, w, writers int, cl *client.Client, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, uint64(3000+w)))
	var acked []string // this writer's acknowledged elements not deleted
	every := time.Duration(float64(time.Second) * float64(writers) / float64(max(s.rate, 1)))
	next := time.Now()
	for seq := 0; ctx.Err() == nil; seq++ {
		if d := time.Until(next); d > 0 {
			sleep(ctx, d)
		}
		next = next.Add(every)
		if time.Until(next) < -time.Second { // fell behind (an outage): don't burst
			next = time.Now()
		}
		key := setKey(w, seq)
		call := s.rec.now()
		oc, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		err := cl.Put(oc, []byte(key), setValue(key))
		cancel()
		s.rec.add("insert", key, call, err)
		if err != nil {
			s.set(key, setInsertUnknown)
			continue
		}
		s.set(key, setInserted)
		acked = append(acked, key)
		if seq%s.deleteEvery != 0 {
			continue
		}
		// Half the deletes hit the element just inserted (its put and
		// tombstone in one L0), half an older one: its put long compacted
		// into a deeper level, the tombstone over it.
		victim := key
		if rng.IntN(2) == 0 {
			i := rng.IntN(len(acked))
			victim = acked[i]
			acked[i] = acked[len(acked)-1]
			acked = acked[:len(acked)-1]
		}
		call = s.rec.now()
		oc, cancel = context.WithTimeout(context.Background(), 3*time.Second)
		err = cl.Delete(oc, []byte(victim))
		cancel()
		s.rec.add("delete", victim, call, err)
		if err != nil {
			s.set(victim, setDeleteUnknown)
		} else {
			s.set(victim, setDeleted)
		}
	}
}

// setResult is the set check's outcome.
type setResult struct {
	inserted, deleted int      // acknowledged inserts (still expected) and deletes checked
	lost, unexpected  []string // acknowledged and missing; never written or wrong value
	resurrected       []string // acknowledged deletes found again
	scanned           int
}

// check scans every region (retrying the scan, at most d) after the
// writers stopped and compares.
func (s *setLoad) check(ctx context.Context, cl *client.Client, d time.Duration) (setResult, error) {
	var found map[string][]byte
	var err error
	for deadline := time.Now().Add(d); ; {
		if found, err = scanSet(ctx, cl); err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		sleep(ctx, 500*time.Millisecond)
	}
	if err != nil {
		return setResult{}, fmt.Errorf("torture: final scan: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return compareSet(s.elems, found), nil
}

// compareSet compares what the writers know of the elements with what a
// final scan found.
func compareSet(elems map[string]setState, found map[string][]byte) setResult {
	res := setResult{scanned: len(found)}
	for k, st := range elems {
		v, present := found[k]
		switch st {
		case setInserted:
			res.inserted++
			if !present {
				res.lost = append(res.lost, k)
			}
		case setDeleted:
			res.deleted++
			if present {
				res.resurrected = append(res.resurrected, k)
			}
		}
		if present && !bytes.Equal(v, setValue(k)) {
			res.unexpected = append(res.unexpected, k+" (wrong value)")
		}
	}
	for k := range found {
		if _, ok := elems[k]; !ok {
			res.unexpected = append(res.unexpected, k+" (never written)")
		}
	}
	for _, l := range [][]string{res.lost, res.unexpected, res.resurrected} {
		sort.Strings(l)
	}
	return res
}

// scanSet reads every set element of the cluster.
func scanSet(ctx context.Context, cl *client.Client) (map[string][]byte, error) {
	sc, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	found := map[string][]byte{}
	it := cl.Scan(sc, []byte("k"), []byte("l"), client.ScanOptions{})
	defer it.Close()
	for it.Next() {
		if k := string(it.Key()); strings.Contains(k, ".set.") {
			found[k] = bytes.Clone(it.Value())
		}
	}
	return found, it.Err()
}
