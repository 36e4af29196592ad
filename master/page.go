package master

import (
	"embed"
	"fmt"
	"html/template"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/tebis-go/tebis/internal/coord"
	"github.com/tebis-go/tebis/region"
)

//go:embed templates/status.html
var pageFS embed.FS

// statusPage renders a page (html/template escapes every value).
var statusPage = template.Must(template.New("status.html").Funcs(template.FuncMap{
	"ago": func(now, t time.Time) string { return now.Sub(t).Round(time.Millisecond).String() },
}).ParseFS(pageFS, "templates/status.html"))

// pageInput is everything the status page shows, gathered.
type pageInput struct {
	Self       string // this master's name
	Snap       snapshot
	Now        time.Time
	Masters    map[string]coord.MasterInfo
	MastersErr string
	Leader     string
	// Statuses are the live servers' own statuses, by name (a live server
	// with an HTTP address and no entry was not asked).
	Statuses map[string]fetched
}

// fetched is a region server's status, or why it could not be read.
type fetched struct {
	Status region.Status
	Err    error
}

// page is the status page's model.
type page struct {
	Name       string
	Role       string // "leader" or "standby"
	Leader     string
	Since      time.Time
	Now        time.Time
	Validated  bool
	MapErr     string
	Map        bool // a map is known
	MapVersion uint64
	Replicas   int
	Masters    []masterRow
	MastersErr string
	Servers    []serverRow
	Regions    []regionRow
	Maps       []MapChange
	Failovers  []Failover
}

type masterRow struct {
	Name, HTTP string
	Leader     bool
}

// serverRow is a region server of the map or registered.
type serverRow struct {
	Name string
	// State: "live"; "live, new run" (registered as a run the map does
	// not name yet); "live, not in the map"; "dead" (in the map, not
	// registered).
	State string
	Live  bool
	Run   int64
	Addr  string
	HTTP  string
	// Report is the server's own readiness (its status), "unknown: ..."
	// when unreadable, "" when not asked (dead, or no HTTP address).
	Report   string
	ReportOK bool
	// Disk is its health znode ("" when none: its volume stores writes).
	Disk                     string
	Primary, Backup, Joining []uint64
	Dropped                  []string
}

// regionRow is a region of the map.
type regionRow struct {
	ID         uint64
	Start, End string
	Epoch      uint64
	Primary    string
	Backups    []backupCell
	Joining    []string
	Ops        string // requests per second at the primary, or "unknown"
}

type backupCell struct {
	Name    string
	Lag     string // its replication lag (bytes, commands), or "unknown"
	Dropped bool   // its primary reported it dropped at the region's epoch
}

// buildPage turns what was gathered into the page's model.
func buildPage(in pageInput) page {
	s := in.Snap
	p := page{Name: in.Self, Role: "standby", Leader: in.Leader, Since: s.Since, Now: in.Now, Validated: s.Validated,
		MapErr: s.MapErr, MastersErr: in.MastersErr, Maps: s.Maps, Failovers: s.Failovers}
	if s.Leading {
		p.Role = "leader"
	}
	for _, n := range slices.Sorted(maps.Keys(in.Masters)) {
		p.Masters = append(p.Masters, masterRow{Name: n, HTTP: in.Masters[n].HTTP, Leader: n == in.Leader})
	}
	m := s.Map
	if m == nil || !s.Leading { // a standby's observations are not kept up to date
		return p
	}
	p.Map, p.MapVersion, p.Replicas = true, m.Version, m.Replicas
	names := map[string]bool{}
	for _, srv := range m.Servers {
		names[srv.Name] = true
	}
	for n := range s.Live {
		names[n] = true
	}
	rows := map[string]*serverRow{}
	for _, n := range slices.Sorted(maps.Keys(names)) {
		row := &serverRow{Name: n}
		inMap, ok := m.Server(n)
		si, live := s.Live[n]
		switch {
		case !live:
			row.State, row.Run, row.Addr = "dead", inMap.Started, addrOf(inMap.TCP, inMap.Shm)
		case !ok:
			row.State = "live, not in the map"
		case inMap.Started != 0 && si.Started != inMap.Started:
			row.State = "live, new run"
		default:
			row.State = "live"
		}
		if live {
			row.Live, row.Run, row.Addr, row.HTTP = true, si.Started, addrOf(si.TCP, si.Shm), si.HTTP
			if f, asked := in.Statuses[n]; asked {
				switch {
				case f.Err != nil:
					row.Report = "unknown: " + f.Err.Error()
				case len(f.Status.Unready) > 0:
					row.Report = "not ready: " + strings.Join(f.Status.Unready, "; ")
				default:
					row.Report, row.ReportOK = "ready", true
				}
			}
		}
		if h, ok := s.Health[n]; ok {
			row.Disk = fmt.Sprintf("%s since %s: %s", h.State, time.Unix(0, h.Since).UTC().Format(time.RFC3339), h.Error)
		}
		rows[n] = row
	}
	for j := range s.Dropped {
		if r := rows[j.Server]; r != nil {
			r.Dropped = append(r.Dropped, fmt.Sprintf("region %d at epoch %d", j.Region, j.Epoch))
		}
	}
	for _, r := range m.Regions {
		if row := rows[r.Primary]; row != nil {
			row.Primary = append(row.Primary, r.ID)
		}
		for _, b := range r.Backups {
			if row := rows[b]; row != nil {
				row.Backup = append(row.Backup, r.ID)
			}
		}
		for _, b := range r.Joining {
			if row := rows[b]; row != nil {
				row.Joining = append(row.Joining, r.ID)
			}
		}
		rr := regionRow{ID: r.ID, Start: r.Start, End: r.End, Epoch: r.Epoch, Primary: r.Primary, Joining: r.Joining, Ops: "unknown"}
		prim := primaryStatus(in.Statuses, r.Primary, r.ID, r.Epoch)
		if prim != nil {
			rr.Ops = fmt.Sprintf("%.1f", prim.OpsPerSec)
		}
		for _, b := range r.Backups {
			c := backupCell{Name: b, Lag: "unknown", Dropped: s.Dropped[Join{r.ID, r.Epoch, b}]}
			if prim != nil {
				if lag, ok := prim.Backups[b]; ok {
					c.Lag = fmt.Sprintf("%d B, %d commands", lag.Bytes, lag.Commands)
				}
			}
			rr.Backups = append(rr.Backups, c)
		}
		p.Regions = append(p.Regions, rr)
	}
	for _, n := range slices.Sorted(maps.Keys(rows)) {
		sort.Strings(rows[n].Dropped)
		p.Servers = append(p.Servers, *rows[n])
	}
	return p
}

// primaryStatus is region id's entry in its primary's status, if that
// status was read and describes the region at epoch as its primary.
func primaryStatus(st map[string]fetched, primary string, id, epoch uint64) *region.RegionStatus {
	f, ok := st[primary]
	if !ok || f.Err != nil {
		return nil
	}
	for i, r := range f.Status.Regions {
		if r.ID == id && r.Role == "primary" && r.Epoch == epoch {
			return &f.Status.Regions[i]
		}
	}
	return nil
}

func addrOf(tcp, shm string) string {
	if tcp != "" {
		return tcp
	}
	return shm
}
