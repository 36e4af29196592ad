package replication

import "context"

// startShipper is NewShipper, Attach and Serve: a stream serving its
// region, as a region server starts one.
func startShipper(cfg ShipperConfig) (*Shipper, error) {
	s, err := NewShipper(cfg)
	if err != nil {
		return nil, err
	}
	if err := s.Attach(context.Background()); err != nil {
		return nil, err
	}
	s.Serve()
	return s, nil
}
