package inspect

import (
	"bytes"
	"fmt"

	"github.com/tebis-go/tebis/engine"
)

// DiffReport compares one region in two volumes.
type DiffReport struct {
	Region     uint64   `json:"region"`
	KeysA      int      `json:"keys_a"`
	KeysB      int      `json:"keys_b"`
	OnlyA      int      `json:"only_in_a"`
	OnlyB      int      `json:"only_in_b"`
	Different  int      `json:"different_values"`
	Examples   []string `json:"examples"`
	Structure  []string `json:"structure_differences"` // levels, when both have them
	Equivalent bool     `json:"equivalent"`
}

// Diff compares a region's logical content (and level shapes) in a and b.
func Diff(a, b *engine.Inspector, region uint64, o Output) error {
	pa, err := a.Content(region)
	if err != nil {
		return fmt.Errorf("first volume: %w", err)
	}
	pb, err := b.Content(region)
	if err != nil {
		return fmt.Errorf("second volume: %w", err)
	}
	rep := DiffReport{Region: region, KeysA: len(pa), KeysB: len(pb)}
	example := func(format string, args ...any) {
		if len(rep.Examples) < 10 {
			rep.Examples = append(rep.Examples, fmt.Sprintf(format, args...))
		}
	}
	i, j := 0, 0
	for i < len(pa) || j < len(pb) {
		switch {
		case j == len(pb) || (i < len(pa) && bytes.Compare(pa[i].Key, pb[j].Key) < 0):
			rep.OnlyA++
			example("only in the first: %s", keyString(pa[i].Key))
			i++
		case i == len(pa) || bytes.Compare(pa[i].Key, pb[j].Key) > 0:
			rep.OnlyB++
			example("only in the second: %s", keyString(pb[j].Key))
			j++
		default:
			if !bytes.Equal(pa[i].Value, pb[j].Value) {
				rep.Different++
				example("different values: %s (%d and %d bytes)", keyString(pa[i].Key), len(pa[i].Value), len(pb[j].Value))
			}
			i++
			j++
		}
	}
	la, lb := levels(a, region), levels(b, region)
	for n, x := range la {
		if y, ok := lb[n]; ok && (x.Height != y.Height || x.Pairs != y.Pairs || x.Nodes != y.Nodes) {
			rep.Structure = append(rep.Structure, fmt.Sprintf("L%d: height %d/%d, keys %d/%d, nodes %d/%d", n, x.Height, y.Height, x.Pairs, y.Pairs, x.Nodes, y.Nodes))
		}
	}
	rep.Equivalent = rep.OnlyA == 0 && rep.OnlyB == 0 && rep.Different == 0
	if o.JSON {
		if err := o.json(rep); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(o.W, "region %d: %d keys in the first, %d in the second; %d only in the first, %d only in the second, %d with different values\n",
			region, rep.KeysA, rep.KeysB, rep.OnlyA, rep.OnlyB, rep.Different)
		for _, e := range rep.Examples {
			fmt.Fprintln(o.W, "  "+e)
		}
		for _, s := range rep.Structure {
			fmt.Fprintln(o.W, "  level shapes differ: "+s)
		}
		if rep.Equivalent {
			fmt.Fprintln(o.W, "equivalent")
		}
	}
	if !rep.Equivalent {
		return fmt.Errorf("%w: region %d differs", ErrProblems, region)
	}
	return nil
}

func levels(in *engine.Inspector, region uint64) map[int]engine.LevelSketch {
	out := map[int]engine.LevelSketch{}
	for _, r := range in.Summary().Regions {
		if r.ID == region {
			for _, l := range r.Levels {
				out[l.Level] = l
			}
		}
	}
	return out
}
