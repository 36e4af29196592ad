package coord

import (
	"bytes"
	"encoding/json"
	"testing"
)

// Fuzz targets for what coord decodes from ZooKeeper, which anyone who
// can write the cluster's znodes controls: report names, the region map,
// server and health znodes. Each must refuse malformed input with an
// error, never panic, and what it accepts must survive encoding again.

func FuzzParseReport(f *testing.F) {
	for _, r := range []Report{JoinReport{Region: 1, Epoch: 2, Server: "rs1"}, DropReport{Region: 3, Epoch: 4, Server: "rs-2"},
		LogReport{Region: 5, Epoch: 6, Pos: 7<<32 | 4096, Server: "rs3", Complete: true}, LogReport{Region: 5, Epoch: 6, Pos: 1, Server: "a-b"}, ReleaseReport{Region: 8, Epoch: 9, Server: "rs4"}, LostReport{Region: 8, Epoch: 9, Server: "rs5"}} {
		f.Add(r.znode())
	}
	f.Add("drop-1-2-")
	f.Add("log-1-2-x-rs1")
	f.Fuzz(func(t *testing.T, name string) {
		r, ok := parseReport(name)
		if !ok {
			return
		}
		if r.Key().Server == "" {
			t.Fatalf("%q parsed as %#v: no server", name, r)
		}
		again, ok := parseReport(r.znode())
		if !ok || again != r {
			t.Fatalf("%q parsed as %#v, whose name %q parses as %#v, %v", name, r, r.znode(), again, ok)
		}
	})
}

func FuzzDecodeMap(f *testing.F) {
	good, _ := json.Marshal(testMap(3))
	f.Add(good)
	f.Add([]byte(`{"version":1,"servers":[{"name":"a"}],"regions":[{"id":1,"primary":"a","epoch":1}]}`))
	f.Add([]byte(`{"version":1,"regions":[{"id":1,"start":"m","end":"a"}]}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := DecodeMap(data)
		if err != nil {
			return
		}
		enc, err := json.Marshal(m)
		if err != nil {
			t.Fatalf("a decoded map does not encode: %v", err)
		}
		m2, err := DecodeMap(enc)
		if err != nil {
			t.Fatalf("%s decoded, but its encoding %s does not: %v", data, enc, err)
		}
		if enc2, _ := json.Marshal(m2); !bytes.Equal(enc, enc2) {
			t.Fatalf("map %s re-encodes as %s", enc, enc2)
		}
	})
}

func FuzzDecodeServerInfo(f *testing.F) {
	good, _ := json.Marshal(server("rs1"))
	f.Add("rs1", good)
	f.Add("rs1", []byte(`{"name":"rs2"}`))
	f.Add("", []byte(`{}`))
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		si, err := decodeServerInfo(name, data)
		if err != nil {
			return
		}
		enc, _ := json.Marshal(si)
		again, err := decodeServerInfo(name, enc)
		if err != nil || again != si {
			t.Fatalf("%s decoded as %+v, whose encoding %s decodes as %+v, %v", data, si, enc, again, err)
		}
	})
}

func FuzzDecodeHealth(f *testing.F) {
	good, _ := json.Marshal(Health{Name: "rs1", Started: 5, State: HealthNoSpace, Error: "ENOSPC", Since: 7})
	f.Add("rs1", good)
	f.Add("rs1", []byte(`{"name":"rs1","state":"failed"}`))
	f.Add("rs1", []byte(`[]`))
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		h, err := decodeHealthData(name, data)
		if err != nil {
			return
		}
		enc, _ := json.Marshal(h)
		again, err := decodeHealthData(name, enc)
		if err != nil || again != h {
			t.Fatalf("%s decoded as %+v, whose encoding %s decodes as %+v, %v", data, h, enc, again, err)
		}
	})
}

func FuzzParseRequests(f *testing.F) {
	f.Add(moveZnode(3, "rs-2"), drainZnode("rs1"))
	f.Add(rebalanceZnode, "move-0-x")
	f.Add("move-18446744073709551616-rs1", "drain-")
	f.Fuzz(func(t *testing.T, a, b string) {
		rq := parseRequests([]string{a, b})
		var again []string
		for region, server := range rq.Moves {
			if region == 0 || server == "" {
				t.Fatalf("%q, %q: a move of region %d to %q", a, b, region, server)
			}
			again = append(again, moveZnode(region, server))
		}
		for server := range rq.Drained {
			if server == "" {
				t.Fatalf("%q, %q: a drain of no server", a, b)
			}
			again = append(again, drainZnode(server))
		}
		if rq.Rebalance {
			again = append(again, rebalanceZnode)
		}
		rq2 := parseRequests(again)
		if len(rq2.Moves) != len(rq.Moves) || len(rq2.Drained) != len(rq.Drained) || rq2.Rebalance != rq.Rebalance {
			t.Fatalf("%q, %q parsed as %+v, whose names %q parse as %+v", a, b, rq, again, rq2)
		}
		for region, server := range rq.Moves {
			if rq2.Moves[region] != server {
				t.Fatalf("move of region %d: %q, then %q", region, server, rq2.Moves[region])
			}
		}
	})
}
