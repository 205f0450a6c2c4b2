package filestorageextension

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// noteFile is the file in the storage directory where the process that last
// opened a client there describes itself. A collector in another container
// sees the holder of a lock only as "PID 0" (its PID namespace is not this
// one); the note is how the error can still name it, with the Pod the
// environment names (the node DaemonSets set POD_NAMESPACE and K8S_POD_NAME
// from the downward API).
const noteFile = ".flowtel-storage-holder.json"

// holderNote is what a process writes about itself in noteFile.
type holderNote struct {
	PID          int       `json:"pid"`
	PIDNamespace string    `json:"pid_namespace,omitempty"` // e.g. pid:[4026531836]
	Hostname     string    `json:"hostname,omitempty"`
	Namespace    string    `json:"pod_namespace,omitempty"`
	Pod          string    `json:"pod,omitempty"`
	Since        time.Time `json:"since"`
}

// selfNote describes this process, from the real /proc (not procRoot).
func selfNote() holderNote {
	ns, _ := os.Readlink("/proc/self/ns/pid")
	host, _ := os.Hostname()
	return holderNote{PID: os.Getpid(), PIDNamespace: ns, Hostname: host,
		Namespace: os.Getenv("POD_NAMESPACE"), Pod: os.Getenv("K8S_POD_NAME"), Since: time.Now().UTC().Truncate(time.Second)}
}

func (n holderNote) sameProcess(o holderNote) bool {
	return n.PID == o.PID && n.PIDNamespace == o.PIDNamespace
}

// stale: the note's process is in this PID namespace and gone.
func (n holderNote) stale() bool {
	if n.PIDNamespace == "" || n.PIDNamespace != selfNote().PIDNamespace {
		return false // cannot tell
	}
	_, err := os.Stat(filepath.Join("/proc", strconv.Itoa(n.PID)))
	return os.IsNotExist(err)
}

// pod is where the note's process runs (its Pod, else its host name) and
// since when it holds the directory.
func (n holderNote) pod() string {
	var parts []string
	if n.Pod != "" || n.Namespace != "" {
		parts = append(parts, fmt.Sprintf("Pod %s/%s", n.Namespace, n.Pod))
	} else if n.Hostname != "" {
		parts = append(parts, "host "+n.Hostname)
	}
	return strings.Join(append(parts, "since "+n.Since.Format(time.RFC3339)), ", ")
}

// String is the note for an error message.
func (n holderNote) String() string {
	return fmt.Sprintf("%s, pid %d in its PID namespace %s", n.pod(), n.PID, n.PIDNamespace)
}

func writeNote(dir string, n holderNote) error {
	b, err := json.Marshal(n)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, noteFile+".*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(append(b, '\n'))
	cerr := tmp.Close()
	if werr != nil || cerr != nil {
		os.Remove(tmp.Name())
		if werr != nil {
			return werr
		}
		return cerr
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, noteFile)); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}

func readNote(dir string) (holderNote, bool) {
	var n holderNote
	b, err := os.ReadFile(filepath.Join(dir, noteFile))
	if err != nil || json.Unmarshal(b, &n) != nil || n.PID == 0 {
		return holderNote{}, false
	}
	return n, true
}

// removeNote removes the note if it is still n (another process may have
// written its own since).
func removeNote(dir string, n *holderNote) {
	if cur, ok := readNote(dir); ok && cur.sameProcess(*n) && cur.Since.Equal(n.Since) {
		os.Remove(filepath.Join(dir, noteFile))
	}
}
