package regionmap

import (
	"errors"
	"path/filepath"
	"testing"
)

const good = `
version: 3
servers:
  - {name: rs1, tcp: "127.0.0.1:7001", shm: /run/rs1.sock}
  - {name: rs2, tcp: "127.0.0.1:7002"}
regions:
  - {id: 1, start: "", end: "g", primary: rs1, backups: [rs2], epoch: 1}
  - {id: 2, start: "g", end: "", primary: rs2, epoch: 4}
`

func TestParseAndLookup(t *testing.T) {
	m, err := Parse([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	for key, id := range map[string]uint64{"a": 1, "": 1, "f~": 1, "g": 2, "zzz": 2} {
		if r := m.Lookup([]byte(key)); r == nil || r.ID != id {
			t.Fatalf("lookup %q: %+v, want region %d", key, r, id)
		}
	}
	if s, ok := m.Server("rs2"); !ok || s.Addr("tcp") != "127.0.0.1:7002" || s.Addr("shm") != "" {
		t.Fatalf("server rs2: %+v", s)
	}
	path := filepath.Join(t.TempDir(), "m.yaml")
	if err := WriteFile(path, m); err != nil {
		t.Fatal(err)
	}
	back, err := File(path).Load(t.Context())
	if err != nil || back.Version != 3 || len(back.Regions) != 2 || back.Regions[1].Epoch != 4 {
		t.Fatalf("round trip: %+v %v", back, err)
	}
}

func TestInvalid(t *testing.T) {
	cases := map[string]string{
		"version 0":                    `{version: 0, servers: [{name: a, tcp: x}], regions: [{id: 1, primary: a, epoch: 1}]}`,
		"gap":                          `{version: 1, servers: [{name: a, tcp: x}], regions: [{id: 1, end: b, primary: a, epoch: 1}, {id: 2, start: c, primary: a, epoch: 1}]}`,
		"unknown server":               `{version: 1, servers: [{name: a, tcp: x}], regions: [{id: 1, primary: b, epoch: 1}]}`,
		"no address":                   `{version: 1, servers: [{name: a}], regions: [{id: 1, primary: a, epoch: 1}]}`,
		"duplicate id":                 `{version: 1, servers: [{name: a, tcp: x}], regions: [{id: 1, end: b, primary: a, epoch: 1}, {id: 1, start: b, primary: a, epoch: 1}]}`,
		"open end":                     `{version: 1, servers: [{name: a, tcp: x}], regions: [{id: 1, end: b, primary: a, epoch: 1}]}`,
		"unknown field":                `{version: 1, servers: [{name: a, tcp: x}], regions: [{id: 1, primary: a, epoch: 1, color: red}]}`,
		"backup=primary":               `{version: 1, servers: [{name: a, tcp: x}], regions: [{id: 1, primary: a, backups: [a], epoch: 1}]}`,
		"min_copies < 0":               `{version: 1, min_copies: -1, servers: [{name: a, tcp: x}], regions: [{id: 1, primary: a, epoch: 1}]}`,
		"min_copies > replicas":        `{version: 1, replicas: 2, min_copies: 3, servers: [{name: a, tcp: x}, {name: b, tcp: y}], regions: [{id: 1, primary: a, backups: [b], epoch: 1}]}`,
		"min_copies > static copies":   `{version: 1, min_copies: 3, servers: [{name: a, tcp: x}, {name: b, tcp: y}], regions: [{id: 1, primary: a, backups: [b], epoch: 1}]}`,
		"min_copies > static, joining": `{version: 1, min_copies: 2, servers: [{name: a, tcp: x}, {name: b, tcp: y}], regions: [{id: 1, primary: a, joining: [b], epoch: 1}]}`,
		"move_to joining":              `{version: 1, servers: [{name: a, tcp: x}, {name: b, tcp: y}], regions: [{id: 1, primary: a, joining: [b], move_to: b, epoch: 1}]}`,
		"released, no move":            `{version: 1, servers: [{name: a, tcp: x}, {name: b, tcp: y}], regions: [{id: 1, primary: a, backups: [b], released: true, epoch: 1}]}`,
		"move_to primary":              `{version: 1, servers: [{name: a, tcp: x}, {name: b, tcp: y}], regions: [{id: 1, primary: a, backups: [b], move_to: a, epoch: 1}]}`,
	}
	for name, doc := range cases {
		if _, err := Parse([]byte(doc)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

func TestMoveToServing(t *testing.T) {
	m, err := Parse([]byte(`{version: 1, servers: [{name: a, tcp: x}, {name: b, tcp: y}], regions: [{id: 1, primary: a, backups: [b], move_to: b, epoch: 1}]}`))
	if err != nil {
		t.Fatal(err)
	}
	r := m.Region(1)
	if r.MoveTo != "b" || r.Serving("a") || r.Serving("b") {
		t.Fatalf("moving region: MoveTo %q, serving a %v, b %v", r.MoveTo, r.Serving("a"), r.Serving("b"))
	}
	r.MoveTo = ""
	if !r.Serving("a") || r.Serving("b") {
		t.Fatal("a settled region is served by its primary only")
	}
}

func TestMinCopies(t *testing.T) {
	for doc, want := range map[string]int{
		`{version: 1, servers: [{name: a, tcp: x}], regions: [{id: 1, primary: a, epoch: 1}]}`:                                                 1,
		`{version: 1, min_copies: 2, servers: [{name: a, tcp: x}, {name: b, tcp: y}], regions: [{id: 1, primary: a, backups: [b], epoch: 1}]}`: 2,
		`{version: 1, replicas: 3, min_copies: 3, servers: [{name: a, tcp: x}], regions: [{id: 1, primary: a, epoch: 1}]}`:                     3,
	} {
		m, err := Parse([]byte(doc))
		if err != nil {
			t.Errorf("%s: %v", doc, err)
		} else if m.Copies() != want {
			t.Errorf("%s: copies %d, want %d", doc, m.Copies(), want)
		}
	}
}
