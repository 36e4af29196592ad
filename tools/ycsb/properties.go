package ycsb

import (
	"bufio"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
)

// ParseProperties reads a YCSB property file (Java properties: key=value,
// key: value or key value lines; # and ! comments; trailing-backslash
// continuations) into w, matching keys to Workload's `ycsb` tags, plus
// "dotransactions" (false selects Load). It returns the keys it does not
// know (YCSB has many outside the core workload, e.g. fieldcount), in file
// order; values it cannot parse are an error wrapping ErrBadWorkload.
func ParseProperties(r io.Reader, w *Workload) (unknown []string, err error) {
	fields := map[string]int{}
	rt := reflect.TypeFor[Workload]()
	for i := range rt.NumField() {
		if tag := rt.Field(i).Tag.Get("ycsb"); tag != "" && tag != "-" {
			fields[tag] = i
		}
	}
	rv := reflect.ValueOf(w).Elem()
	sc := bufio.NewScanner(r)
	var line string
	for n := 1; sc.Scan(); n++ {
		line += strings.TrimLeft(sc.Text(), " \t\f")
		if strings.HasSuffix(line, `\`) {
			line = strings.TrimSuffix(line, `\`)
			continue
		}
		text := line
		line = ""
		if text == "" || text[0] == '#' || text[0] == '!' {
			continue
		}
		key, val := splitProperty(text)
		if key == "dotransactions" {
			b, err := strconv.ParseBool(val)
			if err != nil {
				return unknown, fmt.Errorf("%w: line %d: dotransactions=%q", ErrBadWorkload, n, val)
			}
			w.Load = !b
			continue
		}
		i, ok := fields[key]
		if !ok {
			unknown = append(unknown, key)
			continue
		}
		if err := setField(rv.Field(i), val); err != nil {
			return unknown, fmt.Errorf("%w: line %d: %s=%q: %w", ErrBadWorkload, n, key, val, err)
		}
	}
	return unknown, sc.Err()
}

// splitProperty splits at the first unescaped '=', ':' or whitespace.
func splitProperty(s string) (key, val string) {
	i := strings.IndexAny(s, "=: \t\f")
	if i < 0 {
		return s, ""
	}
	key, rest := s[:i], strings.TrimLeft(s[i:], " \t\f")
	if rest != "" && (rest[0] == '=' || rest[0] == ':') {
		rest = rest[1:]
	}
	return key, strings.TrimSpace(rest)
}

func setField(f reflect.Value, val string) error {
	if f.Type() == reflect.TypeFor[SizeMix]() {
		m, err := ParseSizeMix(val)
		if err == nil {
			f.Set(reflect.ValueOf(m))
		}
		return err
	}
	switch f.Kind() {
	case reflect.String:
		f.SetString(val)
	case reflect.Int, reflect.Int64:
		v, err := strconv.ParseInt(val, 10, 64)
		if err != nil {
			return err
		}
		f.SetInt(v)
	case reflect.Float64:
		v, err := strconv.ParseFloat(val, 64)
		if err != nil {
			return err
		}
		f.SetFloat(v)
	default:
		return fmt.Errorf("unsupported field kind %v", f.Kind())
	}
	return nil
}
