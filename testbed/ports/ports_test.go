package ports

import (
	"net"
	"strconv"
	"testing"
)

func TestFreeIsBelowTheEphemeralRangeAndBindable(t *testing.T) {
	seen := map[int]bool{}
	for range 50 {
		p, err := Free()
		if err != nil {
			t.Fatal(err)
		}
		if p < lowest || p >= ephemeralStart() {
			t.Fatalf("port %d outside %d-%d", p, lowest, ephemeralStart()-1)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d is not bindable: %v", p, err)
		}
		_ = l.Close()
	}
}

func TestFreeSkipsAPortInUse(t *testing.T) {
	p, err := Free()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for range 200 {
		q, err := Free()
		if err != nil {
			t.Fatal(err)
		}
		if q == p {
			t.Fatalf("Free returned %d, which is listened on", q)
		}
	}
}
