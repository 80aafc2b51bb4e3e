package badger

import (
	"io"
	"log/slog"
	"time"

	"github.com/setpoint-dev/setpoint/store"
)

// Options tunes a DB. The zero value of every field gets a default.
type Options struct {
	// Logger receives the store's and Badger's logs. Default: discard.
	Logger *slog.Logger

	// CompactionWindow is how much recent history background compaction keeps
	// by age. Default: 5 minutes.
	CompactionWindow time.Duration
	// CompactionMinRevisions is how many recent revisions background compaction
	// keeps at least. Default: 10,000. Compaction keeps whichever of the two
	// keeps more.
	CompactionMinRevisions int64
	// CompactionInterval is how often the background compactor looks for work.
	// Default: 1 minute. Negative disables background compaction.
	CompactionInterval time.Duration

	// WatchBuffer is how many events each live watcher may have waiting; one
	// further behind is ended with store.ErrWatcherTooSlow. The first 16 wait
	// in its channel, the rest in a buffer grown on demand. Default:
	// store.DefaultWatchBuffer.
	WatchBuffer int
	// EventRing is how many recent events are kept in memory for watchers
	// that start slightly behind. Default: 4096.
	EventRing int
	// EventRingBytes caps the documents the ring keeps (the newest event
	// always stays); older events are read from the history on disk.
	// Default: 64 MiB.
	EventRingBytes int

	// MaxBatch caps the writes of one group commit. Default: 1024.
	MaxBatch int
	// MaxBatchBytes caps the document bytes of one group commit (a single
	// larger write still commits alone). Default: 512 KiB.
	MaxBatchBytes int

	// ValueLogGCInterval is how often value-log garbage collection runs.
	// Default: 10 minutes. Negative disables it.
	ValueLogGCInterval time.Duration

	// MemTableSize and BlockCacheSize size Badger's memory. Defaults: 16 MiB
	// and 64 MiB. Tests use less. Each commit group of more than one write
	// goes through a Badger KVLoader (a group of one write is one Badger
	// transaction), which allocates (and zeroes) two entry slices sized from
	// the memtable (15% of it over Badger's node size: about 0.9 MB each at
	// 64 MiB), so the memtable size is a fixed CPU cost of every such group:
	// writers that commit a few at a time (controllers writing status) pay
	// it per group. 16 MiB cut the CPU of a lone create by about 30% and of
	// 8 concurrent ones by about 45% against 64 MiB (measured before lone
	// writes became transactions), with no loss at 64 (docs/BENCHMARKS.md,
	// Store); smaller memtables flush to L0 more often.
	MemTableSize   int64
	BlockCacheSize int64

	// SkipOpenVerification skips checking every table file's checksums in
	// Open (it reads the whole LSM tree once: 42 ms of CPU for 20,000 1 KiB
	// documents, docs/BENCHMARKS.md).
	SkipOpenVerification bool
	// ScrubInterval is how often every table file's checksums are checked
	// while the store runs; damage marks the store damaged (see Health).
	// Default: 10 minutes. Negative disables it.
	ScrubInterval time.Duration

	// FreeSpaceReserve is the free space, in bytes, that the store's
	// filesystem keeps: a write group that would leave less is refused with
	// store.ErrNoSpace, and Open below it opens read-only. Default: 256 MiB.
	// Negative disables the check.
	FreeSpaceReserve int64
	// SpaceCheckInterval is how often a store opened read-only for want of
	// space checks whether space is back. Default: 5 seconds.
	SpaceCheckInterval time.Duration

	// Now is the clock of background compaction. Default: time.Now.
	Now func() time.Time

	// noReadChecksums turns off Badger's block and value checksums on read;
	// only the benchmarks that measure their cost set it.
	noReadChecksums bool
}

// DefaultFreeSpaceReserve is the default of Options.FreeSpaceReserve: room
// for what Badger may write through its memory maps once writes stop (the
// active memtable's log, a flush of the memtables, a compaction of the small
// levels) with the default 16 MiB memtable.
const DefaultFreeSpaceReserve = 256 << 20

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.CompactionWindow == 0 {
		o.CompactionWindow = 5 * time.Minute
	}
	if o.CompactionMinRevisions == 0 {
		o.CompactionMinRevisions = 10_000
	}
	if o.CompactionInterval == 0 {
		o.CompactionInterval = time.Minute
	}
	if o.WatchBuffer <= 0 {
		o.WatchBuffer = store.DefaultWatchBuffer
	}
	if o.EventRing <= 0 {
		o.EventRing = 4096
	}
	if o.EventRingBytes <= 0 {
		o.EventRingBytes = 64 << 20
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = 1024
	}
	if o.MaxBatchBytes <= 0 {
		o.MaxBatchBytes = 512 << 10
	}
	if o.ValueLogGCInterval == 0 {
		o.ValueLogGCInterval = 10 * time.Minute
	}
	if o.MemTableSize <= 0 {
		o.MemTableSize = 16 << 20
	}
	if o.BlockCacheSize <= 0 {
		o.BlockCacheSize = 64 << 20
	}
	if o.ScrubInterval == 0 {
		o.ScrubInterval = 10 * time.Minute
	}
	if o.FreeSpaceReserve == 0 {
		o.FreeSpaceReserve = DefaultFreeSpaceReserve
	}
	if o.SpaceCheckInterval <= 0 {
		o.SpaceCheckInterval = 5 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}
