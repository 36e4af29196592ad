package region

import (
	"fmt"
	"maps"
	"slices"
)

// CloseVolume closes the server's volume under it (only Close does so
// otherwise, once nothing installs maps any more): from then on every
// read of the volume's state fails with engine.ErrClosed, Volume.IsCopy
// among them, which reads the handles in memory and no file. It is the
// one way an install meets a copy whose state cannot be read (plan's
// fail step), for the in-process tests (inproc_static_test.go). The
// server's Close then returns engine.ErrClosed.
func (s *Server) CloseVolume() error { return s.vol.Close() }

// CheckRoles checks that each region's role agrees with what the server
// serves and holds: a primary is hosted by the published routing and a
// region hosted there is a primary; a backup has its replica open and a
// region with a replica is a backup; only a primary has a stream. The
// in-process cluster tests call it between events (it takes mapMu: no
// controller event is half handled).
func (s *Server) CheckRoles() error {
	s.mapMu.Lock()
	defer s.mapMu.Unlock()
	st := s.state.Load()
	s.replMu.Lock()
	defer s.replMu.Unlock()
	var errs []string
	for _, id := range slices.Sorted(maps.Keys(s.regions)) {
		rs := s.regions[id]
		hosted := st != nil && st.hosted(id) != nil
		switch {
		case (rs.role == rolePrimary) != hosted:
			errs = append(errs, fmt.Sprintf("region %d: role %d, hosted %v", id, rs.role, hosted))
		case (rs.role == roleBackup) != (rs.backup != nil):
			errs = append(errs, fmt.Sprintf("region %d: role %d, replica open %v", id, rs.role, rs.backup != nil))
		case rs.stream != nil && rs.role != rolePrimary:
			errs = append(errs, fmt.Sprintf("region %d: role %d with a stream", id, rs.role))
		}
	}
	if st != nil {
		for _, id := range st.hostedIDs() {
			if rs := s.regions[id]; rs == nil {
				errs = append(errs, fmt.Sprintf("region %d: hosted without a state", id))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("server %s: roles disagree: %v", s.cfg.Name, errs)
	}
	return nil
}
