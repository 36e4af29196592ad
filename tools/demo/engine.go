package demo

import (
	"errors"
	"fmt"

	"github.com/tebis-go/tebis/engine"
)

// engineStore is the demo's region on a tebis engine volume.
type engineStore struct {
	vol *engine.Volume
	r   *engine.Region
}

// openStore opens the volume in cfg.Dir and its region RegionID, creating
// the region if the volume is new. reopened reports that it existed.
func openStore(cfg Config) (_ store, reopened bool, _ error) {
	mode := engine.SyncModeAsync
	if cfg.Sync {
		mode = engine.SyncModeSync
	}
	vol, err := engine.Open(engine.Options{
		Dir:          cfg.Dir,
		L0Pairs:      cfg.L0Pairs,
		GrowthFactor: cfg.GrowthFactor,
		SyncMode:     mode,
		Logger:       cfg.Logger.Named("engine"),
	})
	if err != nil {
		return nil, false, fmt.Errorf("open volume %s: %w", cfg.Dir, err)
	}
	r, created, err := vol.OpenRegion(engine.RegionDesc{ID: RegionID})
	if err != nil {
		return nil, false, errors.Join(fmt.Errorf("open region %d: %w", RegionID, err), vol.Close())
	}
	return &engineStore{vol: vol, r: r}, !created, nil
}

func (s *engineStore) Put(key, value []byte) error { return s.r.Put(key, value) }

func (s *engineStore) Get(key []byte) ([]byte, bool, error) {
	v, err := s.r.Get(key)
	if errors.Is(err, engine.ErrNotFound) {
		return nil, false, nil
	}
	return v, err == nil, err
}

// WaitIdle makes the load durable (async mode) and waits for compactions.
func (s *engineStore) WaitIdle() error {
	if err := s.r.Sync(); err != nil {
		return err
	}
	return s.r.WaitIdle()
}

func (s *engineStore) Close() error { return s.vol.Close() }
