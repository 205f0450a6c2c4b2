//go:build integration

package e2ekube

import (
	"bufio"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// podLogs holds what the Pods of a namespace logged at warn or error while
// it followed them, Pods a rollout replaced included: their logs go with
// them, and a count that does not add up after a rollout is explained, if
// at all, by what the replaced collectors said on their way out.
type podLogs struct {
	mu    sync.Mutex
	lines []logLine
}

// logLine is a line a container logged, when the test read it.
type logLine struct {
	at        time.Time
	container string // Pod/container
	text      string
}

// maxNotable bounds the lines a failure shows per container (the latest).
const maxNotable = 40

// followLogs follows every container of every Pod in namespace, as Pods
// come, until the test ends; a failed test logs what they said.
func (b *bed) followLogs(t *testing.T, namespace string) *podLogs {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pl := &podLogs{}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		if t.Failed() {
			t.Logf("warnings and errors of the Pods in %s while the test followed them:\n%s", namespace, pl.String())
		}
	})
	wg.Go(func() {
		following := map[string]bool{}
		for ctx.Err() == nil {
			pods, err := b.Admin.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
			if err == nil {
				for _, p := range pods.Items {
					for _, c := range p.Status.ContainerStatuses {
						key := p.Name + "/" + c.Name
						if following[key] || c.State.Running == nil {
							continue
						}
						s, err := b.Admin.CoreV1().Pods(namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: c.Name, Follow: true}).Stream(ctx)
						if err != nil {
							continue // again at the next look
						}
						following[key] = true
						wg.Go(func() {
							defer s.Close()
							sc := bufio.NewScanner(s)
							sc.Buffer(make([]byte, 64<<10), 1<<20)
							for sc.Scan() {
								if l := sc.Text(); notable(l) {
									pl.add(key, l)
								}
							}
						})
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	})
	return pl
}

// failedExport is what exporterhelper logs (at info) when an export attempt
// failed and will be retried.
const failedExport = "Exporting failed"

// notable tells a collector's warn or error line (console or JSON
// encoding), or a failed export attempt.
func notable(line string) bool {
	return strings.Contains(line, "\twarn\t") || strings.Contains(line, "\terror\t") ||
		strings.Contains(line, `"level":"warn"`) || strings.Contains(line, `"level":"error"`) ||
		strings.Contains(line, failedExport)
}

func (pl *podLogs) add(container, text string) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	pl.lines = append(pl.lines, logLine{at: time.Now(), container: container, text: text})
}

// since lists the lines read from t0 on, of containers of Pods whose name
// starts with pod, that contain substr.
func (pl *podLogs) since(t0 time.Time, pod, substr string) []string {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	var out []string
	for _, l := range pl.lines {
		if !l.at.Before(t0) && strings.HasPrefix(l.container, pod) && strings.Contains(l.text, substr) {
			out = append(out, l.container+": "+l.text)
		}
	}
	return out
}

func (pl *podLogs) String() string {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	by := map[string][]string{}
	var keys []string
	for _, l := range pl.lines {
		if by[l.container] == nil {
			keys = append(keys, l.container)
		}
		by[l.container] = append(by[l.container], l.text)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		ls := by[k]
		if len(ls) > maxNotable {
			ls = ls[len(ls)-maxNotable:]
		}
		fmt.Fprintf(&b, "%s:\n  %s\n", k, strings.Join(ls, "\n  "))
	}
	if b.Len() == 0 {
		return "(none)"
	}
	return b.String()
}
