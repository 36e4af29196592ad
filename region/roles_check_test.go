package region

import (
	"fmt"
	"maps"
	"slices"
)

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
