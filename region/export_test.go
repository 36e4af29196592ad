package region

// CloseVolume closes the server's volume under it (only Close does so
// otherwise, once nothing installs maps any more): from then on every
// read of the volume's state fails with engine.ErrClosed, Volume.IsCopy
// among them, which reads the handles in memory and no file. It is the
// one way an install meets a copy whose state cannot be read (plan's
// fail step), for the in-process tests (inproc_static_test.go). The
// server's Close then returns engine.ErrClosed.
func (s *Server) CloseVolume() error { return s.vol.Close() }
