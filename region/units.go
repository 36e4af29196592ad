package region

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// ByteSize is a size written with an explicit unit in configuration files
// and flags: "2MiB", "64KiB", "1GiB", "512B" (K/M/G without the i are
// powers of 1000).
type ByteSize int64

var byteUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1},
}

// ParseByteSize parses a size with its unit.
func ParseByteSize(s string) (ByteSize, error) {
	t := strings.TrimSpace(s)
	for _, u := range byteUnits {
		if num, ok := strings.CutSuffix(t, u.suffix); ok {
			n, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
			if err != nil || n < 0 {
				return 0, fmt.Errorf("size %q: want a number and a unit (B, KiB, MiB, GiB, ...)", s)
			}
			return ByteSize(n * float64(u.mult)), nil
		}
	}
	return 0, fmt.Errorf("size %q has no unit (B, KiB, MiB, GiB, ...)", s)
}

func (b ByteSize) String() string {
	for _, u := range byteUnits[:4] {
		if b >= ByteSize(u.mult) && int64(b)%u.mult == 0 && (u.suffix == "TiB" || int64(b)/u.mult < 1024) {
			return fmt.Sprintf("%d%s", int64(b)/u.mult, u.suffix)
		}
	}
	return fmt.Sprintf("%dB", int64(b))
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (b *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParseByteSize(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*b = v
	return nil
}

// MarshalYAML implements yaml.Marshaler.
func (b ByteSize) MarshalYAML() (any, error) { return b.String(), nil }

// Set implements flag.Value.
func (b *ByteSize) Set(s string) error {
	v, err := ParseByteSize(s)
	if err == nil {
		*b = v
	}
	return err
}

// Duration is a time span written with its unit ("50us", "2s").
type Duration time.Duration

// UnmarshalYAML implements yaml.Unmarshaler.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: duration %q: want a number and a unit (us, ms, s)", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML implements yaml.Marshaler.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

func (d Duration) String() string { return time.Duration(d).String() }
