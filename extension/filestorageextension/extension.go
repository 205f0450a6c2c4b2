package filestorageextension

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/filestorage"
	bolterrors "go.etcd.io/bbolt/errors"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.uber.org/zap"
)

// fileStorage is contrib's extension, whose GetClient turns the lock timeout
// into an error naming the file and its holder.
//
// Why the storage extension and not the components that use it: a node
// collector's clients are the conntrack receiver's checkpoint and the
// load_balancing exporter's persistent sending queue, which exporterhelper
// opens (code flowtel does not own), and pipelines start from their
// exporters, so it is the queue that meets a taken lock first: before this,
// `failed to start "load_balancing" exporter: timeout`. Every client of every
// component comes through GetClient, so the one check here covers the queue,
// the checkpoint and any component a user adds.
type fileStorage struct {
	storage.Extension
	dir     string
	timeout time.Duration
	logger  *zap.Logger

	mu   sync.Mutex
	note *holderNote // the note this process wrote in dir; nil before its first client
}

func newFileStorage(inner storage.Extension, cfg *filestorage.Config, logger *zap.Logger) *fileStorage {
	return &fileStorage{Extension: inner, dir: cfg.Directory, timeout: cfg.Timeout, logger: logger}
}

// GetClient opens the component's storage file through contrib's extension.
// On success this process notes itself in the directory (holderNote), which
// is how a collector in another container, that cannot see this process, can
// still name it.
func (f *fileStorage) GetClient(ctx context.Context, kind component.Kind, id component.ID, name string) (storage.Client, error) {
	c, err := f.Extension.GetClient(ctx, kind, id, name)
	if err != nil {
		if errors.Is(err, bolterrors.ErrTimeout) {
			return nil, f.lockError(kind, id, name, err)
		}
		return nil, err
	}
	f.writeNote()
	return c, nil
}

// Shutdown shuts contrib's extension down and removes this process's note.
func (f *fileStorage) Shutdown(ctx context.Context) error {
	err := f.Extension.Shutdown(ctx)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.note != nil {
		removeNote(f.dir, f.note)
		f.note = nil
	}
	return err
}

func (f *fileStorage) writeNote() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.note != nil {
		return
	}
	n := selfNote()
	if err := writeNote(f.dir, n); err != nil {
		// Only a later diagnosis is poorer: say so at debug level.
		f.logger.Debug("cannot note this process as the holder of the storage directory", zap.String("directory", f.dir), zap.Error(err))
		return
	}
	f.note = &n
}

// fileName is the name contrib gives a component's file (before it hashes a
// name too long for the file system): <kind>_<type>_<name>[_<client name>].
func fileName(kind component.Kind, id component.ID, name string) string {
	raw := strings.ToLower(kind.String()) + "_" + id.Type().String() + "_" + id.Name()
	if name != "" {
		raw += "_" + name
	}
	return raw
}

// lockError is the error for a storage file whose lock another process
// holds: the file, who holds it as far as this process can tell, and what to
// do.
func (f *fileStorage) lockError(kind component.Kind, id component.ID, name string, cause error) error {
	want := filepath.Join(f.dir, fileName(kind, id, name))
	locks, lerr := lockedFiles(f.dir)
	file := pickFile(want, locks)
	holders := locks[file]
	who := "the holder is unknown"
	if lerr != nil {
		who += fmt.Sprintf(" (%v)", lerr)
	}
	note, hasNote := readNote(f.dir)
	self := selfNote()
	hasNote = hasNote && !note.sameProcess(self) && !note.stale()
	if lerr == nil {
		// The note of a holder this process sees adds its Pod to its PID.
		for i, h := range holders {
			if hasNote && note.PIDNamespace == self.PIDNamespace && note.PID == h.pid {
				holders[i].note, hasNote = note.pod(), false
			}
		}
		who = describeHolders(holders)
	}
	if hasNote {
		who += "; the collector that last opened storage there: " + note.String()
	}
	return fmt.Errorf("directory: another process holds the lock on the storage file %s: %s (got %q after %s); "+
		"two collectors cannot share a storage directory: give each its own (flowtel on Kubernetes has one "+
		"per install by default: docs/deploy.md, \"The node's storage directory\"), or stop the other",
		file, who, cause.Error(), f.timeout)
}

// pickFile is the file to name: the component's own when it exists, else the
// one file locked there, else the one that starts like the component's.
func pickFile(want string, locks map[string][]lockHolder) string {
	if fileExists(want) {
		return want
	}
	if len(locks) == 1 {
		for p := range locks {
			return p
		}
	}
	for p := range locks {
		if strings.HasPrefix(p, want) {
			return p
		}
	}
	return want
}

// describeHolders says who holds a lock: a process this one can see (its
// PID and command line), this collector itself, or one it cannot see. The
// kernel lists in /proc/locks only the locks of processes in the PID
// namespace of that /proc: a collector in another container or Pod holds a
// lock that is not listed at all.
func describeHolders(hs []lockHolder) string {
	if len(hs) == 0 {
		return "a process this container cannot see (another container or Pod on this host: /proc/locks lists no holder)"
	}
	var out []string
	for _, h := range hs {
		switch {
		case h.self:
			out = append(out, fmt.Sprintf("this collector (pid %d) holds it already: is the directory configured for two storage extensions?", h.pid))
		case h.pid <= 0:
			out = append(out, "a process outside this container's PID namespace")
		default:
			s := fmt.Sprintf("pid %d", h.pid)
			if h.cmd != "" {
				s += fmt.Sprintf(" (%q)", h.cmd)
			}
			if h.note != "" {
				s += ", " + h.note
			}
			if h.cgroup != "" && h.cgroup != "/" {
				s += ", cgroup " + h.cgroup
			}
			out = append(out, s)
		}
	}
	return strings.Join(out, ", ")
}
