package inspect

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"

	"github.com/tebis-go/tebis/engine"
)

// Output writes results as text or JSON.
type Output struct {
	W    io.Writer
	JSON bool
}

func (o Output) json(v any) error {
	enc := json.NewEncoder(o.W)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// keyString shows a key as text when printable, else as hex.
func keyString(k []byte) string {
	for _, c := range k {
		if c < 0x20 || c > 0x7e {
			return "0x" + fmt.Sprintf("%x", k)
		}
	}
	return strconv.Quote(string(k))
}

func rangeString(start, end []byte) string {
	s, e := "-inf", "+inf"
	if len(start) > 0 {
		s = keyString(start)
	}
	if len(end) > 0 {
		e = keyString(end)
	}
	return "[" + s + ", " + e + ")"
}

// boundString is a range bound for JSON: the key as text when printable,
// else 0x and hex; open the open end's name (-inf or +inf).
func boundString(k []byte, open string) string {
	if len(k) == 0 {
		return open
	}
	if s := keyString(k); s[0] == '"' {
		return string(k)
	}
	return keyString(k)
}

// regionJSON is a region in Summary's JSON: its bounds readable ("start"
// and "end" shadow the descriptor's raw bytes) and "range" as the text
// output shows it, the one unambiguous form.
type regionJSON struct {
	engine.RegionInfo
	Start string `json:"start"`
	End   string `json:"end"`
	Range string `json:"range"`
}

type summaryJSON struct {
	engine.VolumeInfo
	Regions []regionJSON `json:"regions"`
}

// Summary prints the volume and its regions, each with its key range
// [start, end) (-inf and +inf for open ends).
func Summary(in *engine.Inspector, o Output) error {
	s := in.Summary()
	if o.JSON {
		js := summaryJSON{VolumeInfo: s, Regions: []regionJSON{}}
		for _, r := range s.Regions {
			js.Regions = append(js.Regions, regionJSON{RegionInfo: r, Start: boundString(r.Start, "-inf"),
				End: boundString(r.End, "+inf"), Range: rangeString(r.Start, r.End)})
		}
		return o.json(js)
	}
	fmt.Fprintf(o.W, "volume: segment size %d, node size %d, %d segments in the file, %d used, %d free\n",
		s.SegmentSize, s.NodeSize, s.FileSegments, s.UsedSegments, s.FreeSegments)
	for _, r := range s.Regions {
		fmt.Fprintf(o.W, "region %d: role %s, epoch %d, keys %s\n", r.ID, r.Role, r.Epoch, rangeString(r.Start, r.End))
		fmt.Fprintf(o.W, "  L0 recovery point: log index %d offset %d\n", r.RecoveryPoint.Index, r.RecoveryPoint.Offset)
		tw := tabwriter.NewWriter(o.W, 2, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "  level\theight\tnodes\tkeys\tkv bytes\tsegments\troot\t")
		for _, l := range r.Levels {
			fmt.Fprintf(tw, "  L%d\t%d\t%d\t%d\t%d\t%d\t%s\t\n", l.Level, l.Height, l.Nodes, l.Pairs, l.KVBytes, len(l.Segments), in.PtrString(l.Root))
		}
		tw.Flush()
		var garbage int64
		for _, l := range r.Log {
			garbage += l.Garbage
		}
		fmt.Fprintf(o.W, "  value log: %d segments, %d bytes of garbage\n", len(r.Log), garbage)
		tw = tabwriter.NewWriter(o.W, 2, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "    index\tsegment\tseq\tend\tgarbage\t")
		for _, l := range r.Log {
			end := strconv.FormatInt(l.End, 10)
			if l.End == 0 {
				end = "tail"
			}
			fmt.Fprintf(tw, "    %d\t%d\t%d\t%s\t%d\t\n", l.Index, l.Segment, l.Seq, end, l.Garbage)
		}
		tw.Flush()
	}
	return nil
}

// Tree prints a level's shape: one line per node, indented by depth.
func Tree(in *engine.Inspector, region uint64, level int, o Output) error {
	var nodes []map[string]any
	err := in.Tree(region, level, func(depth int, n engine.NodeDump) error {
		first, last := n.Entries[0].Key, n.Entries[len(n.Entries)-1].Key
		if o.JSON {
			nodes = append(nodes, map[string]any{"depth": depth, "ptr": in.PtrString(n.Ptr), "height": n.Height, "keys": len(n.Entries), "first": string(first), "last": string(last)})
			return nil
		}
		kind := "internal"
		if n.Leaf {
			kind = "leaf"
		}
		_, err := fmt.Fprintf(o.W, "%*s%s %s h%d: %d keys %s .. %s\n", 2*depth, "", kind, in.PtrString(n.Ptr), n.Height, len(n.Entries), keyString(first), keyString(last))
		return err
	})
	if err != nil {
		return err
	}
	if o.JSON {
		return o.json(nodes)
	}
	return nil
}

// Node prints one decoded node.
func Node(in *engine.Inspector, p uint64, o Output) error {
	n, err := in.Node(p)
	if err != nil {
		return err
	}
	if o.JSON {
		return o.json(n)
	}
	kind := "internal"
	if n.Leaf {
		kind = "leaf"
	}
	fmt.Fprintf(o.W, "node %s: %s, height %d, %d keys\n", in.PtrString(p), kind, n.Height, len(n.Entries))
	for i, e := range n.Entries {
		if n.Leaf {
			t := ""
			if e.Tombstone {
				t = " tombstone"
			}
			fmt.Fprintf(o.W, "  %4d %s -> value %s (%d bytes)%s\n", i, keyString(e.Key), in.PtrString(e.Ptr), e.ValueLen, t)
		} else {
			fmt.Fprintf(o.W, "  %4d %s -> child %s\n", i, keyString(e.Key), in.PtrString(e.Ptr))
		}
	}
	return nil
}

// Segment prints a segment's header and contents count.
func Segment(in *engine.Inspector, n uint64, o Output) error {
	s, err := in.Segment(n)
	if err != nil {
		return err
	}
	if o.JSON {
		return o.json(s)
	}
	fmt.Fprintf(o.W, "segment %d: %s, region %d, seq %d, primary segment %d, referenced %v\n", s.Segment, s.Kind, s.Region, s.Seq, s.PrimarySeg, s.Referenced)
	if s.Kind == "index" {
		fmt.Fprintf(o.W, "  level %d, max height %d, %d nodes verify\n", s.Level, s.Height, s.Nodes)
	} else {
		fmt.Fprintf(o.W, "  %d records (%d bytes) verify from the start\n", s.Records, s.Bytes)
	}
	return nil
}

// Log prints up to limit records from a position (limit 0: all).
func Log(in *engine.Inspector, region uint64, from engine.LogPosition, limit int, o Output) error {
	var recs []engine.LogRecord
	n := 0
	err := in.Log(region, from, func(r engine.LogRecord) error {
		if limit > 0 && n >= limit {
			return errDone
		}
		n++
		if o.JSON {
			r.Key = bytes.Clone(r.Key)
			recs = append(recs, r)
			return nil
		}
		kind := "put"
		if r.Tombstone {
			kind = "delete"
		}
		_, err := fmt.Fprintf(o.W, "%d:%d %s %s %d bytes\n", r.Position.Index, r.Position.Offset, kind, keyString(r.Key), r.ValueLen)
		return err
	})
	if err != nil && err != errDone {
		return err
	}
	if o.JSON {
		return o.json(recs)
	}
	return nil
}

var errDone = fmt.Errorf("done")

// Check runs the consistency check and prints its report; it returns
// ErrProblems if something is wrong.
func Check(in *engine.Inspector, o Output) error {
	rep := in.Check()
	if o.JSON {
		if err := o.json(rep); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(o.W, "checked %d segments, %d nodes, %d keys, %d log records; %d stale pointers shadowed by newer data\n",
			rep.Segments, rep.Nodes, rep.Pairs, rep.Records, rep.StaleShadowed)
		for _, p := range rep.Problems {
			where := ""
			if p.Region != 0 {
				where = fmt.Sprintf("region %d ", p.Region)
			}
			if p.Level != 0 {
				where += fmt.Sprintf("L%d ", p.Level)
			}
			fmt.Fprintf(o.W, "PROBLEM: %s%s\n", where, p.What)
		}
		if rep.OK() {
			fmt.Fprintln(o.W, "ok")
		}
	}
	if !rep.OK() {
		return fmt.Errorf("%w: %d", ErrProblems, len(rep.Problems))
	}
	return nil
}

// ErrProblems: check or diff found something wrong.
var ErrProblems = fmt.Errorf("inspect: problems found")
