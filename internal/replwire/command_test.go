package replwire

import (
	"bytes"
	"encoding/hex"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tebis-go/tebis/engine"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite internal/replwire/testdata/commands.golden")

// goldenCommands is one command of every kind with every field it uses.
func goldenCommands() []*Command {
	return []*Command{
		{Kind: CmdFlush, Region: 7, Epoch: 3, Segment: 12, Seq: 99, End: 65000, Half: 1, Sealed: true},
		{Kind: CmdFlush, Region: 7, Epoch: 3, Segment: 13, Seq: 100, End: 4096},
		{Kind: CmdCompactionStart, Region: 7, Epoch: 3, Src: 2, Dst: 3, Move: true},
		{Kind: CmdIndexSegment, Region: 7, Epoch: 3, Src: 0, Dst: 1, Segment: 40, Data: []byte("TBSG....nodes")},
		{Kind: CmdCompactionDone, Region: 7, Epoch: 3, Src: 0, Dst: 1, Root: 40<<16 | 4096, Height: 2, Pairs: 1000,
			KVBytes: 52000, Nodes: 30, RPSeg: 13, Seq: 100, RPOff: 4096, Segments: []uint64{40, 41}},
		{Kind: CmdLogFree, Region: 7, Epoch: 3, Segment: 12, Seq: 99},
		{Kind: CmdCheck, Region: 7, Epoch: 3, Data: State{
			Logs:   []engine.LogSegment{{Segment: 12, Seq: 99, End: 65000}, {Segment: 13, Seq: 100}},
			Levels: []Level{{}, {Height: 2, Segments: 2, Root: 40<<16 | 4096, Pairs: 1000, KVBytes: 52000, Nodes: 30}},
			RP:     RecoveryPoint{Segment: 13, Seq: 100, Offset: 4096},
		}.Encode()},
		{Kind: CmdRebase, Region: 7, Epoch: 4, Data: EncodeRebase([]RebasePair{{Old: 12, Seq: 99, New: 30}, {Old: 13, Seq: 100, New: 31}})},
		{Kind: CmdReset, Region: 7, Epoch: 5},
		{Kind: CmdInSync, Region: 7, Epoch: 5},
		{Kind: CmdPairs, Region: 7, Epoch: 5, Data: EncodePairs(EncodePairs(nil, []byte("k1"), []byte("v1")), []byte("k2"), nil)},
		{Kind: CmdApplyFrom, Region: 7, Epoch: 5, Data: Applied{Position: Position{Log: 0xfeed, Index: 3, Segment: 13, Seq: 100, Off: 4096}, Sealed: true}.Encode()},
		// One checkpoint chunk: version 1, one row (client 9, ack 1, seq 1).
		{Kind: CmdRequests, Region: 7, Epoch: 5, Data: []byte{1, 1, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0}},
	}
}

func TestCommandGolden(t *testing.T) {
	var b strings.Builder
	for _, c := range goldenCommands() {
		enc := c.Encode(nil)
		d, err := DecodeCommand(enc)
		if err != nil {
			t.Fatalf("%s: %v", c.Kind, err)
		}
		if !reflect.DeepEqual(d, c) {
			t.Fatalf("%s round trip:\n got %+v\nwant %+v", c.Kind, d, c)
		}
		b.WriteString(c.Kind.String() + " " + hex.EncodeToString(enc) + "\n")
	}
	path := filepath.Join("testdata", "commands.golden")
	if *updateGolden {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if b.String() != string(want) {
		t.Fatalf("encoding changed (run with -update-golden if intended):\n%s\nwant\n%s", b.String(), want)
	}
}

// TestEncodeHeadThenData: EncodeHead followed by Data is Encode, for
// every golden command (what a sender sending them as two slices puts on
// the wire).
func TestEncodeHeadThenData(t *testing.T) {
	for _, c := range goldenCommands() {
		if got, want := append(c.EncodeHead([]byte("x")), c.Data...), c.Encode([]byte("x")); !bytes.Equal(got, want) {
			t.Fatalf("%s: EncodeHead+Data\n%x\nEncode\n%x", c.Kind, got, want)
		}
	}
}

func TestDecodeCommandRejects(t *testing.T) {
	good := goldenCommands()[4].Encode(nil)
	cases := map[string][]byte{
		"short":            good[:cmdFixed-1],
		"magic":            append([]byte{0}, good[1:]...),
		"kind":             patch(good, 4, uint8(CmdRequests)+1),
		"flags":            patch(good, 5, 4),
		"half":             patch(good, 6, 2),
		"reserved":         patch(good, 12, 1),
		"segment count":    patch(good, 68, 9),
		"data on log-free": append(goldenCommands()[5].Encode(nil), 1),
		"log-free no seq":  patch(goldenCommands()[5].Encode(nil), 40, 0),
	}
	for name, b := range cases {
		if _, err := DecodeCommand(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func patch(b []byte, at int, v byte) []byte {
	c := append([]byte(nil), b...)
	c[at] = v
	return c
}

func FuzzDecodeCommand(f *testing.F) {
	for _, c := range goldenCommands() {
		f.Add(c.Encode(nil))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeCommand(b)
		if err != nil {
			return
		}
		again, err := DecodeCommand(c.Encode(nil))
		if err != nil || !reflect.DeepEqual(again, c) {
			t.Fatalf("re-encoding %+v: %+v, %v", c, again, err)
		}
	})
}
