// Command echo is the testbed's traffic endpoint: connections with a known
// number of payload bytes, so a test can check the byte counts of the flow
// records the collectors report.
//
//	echo serve
//	    HTTP on TCP 8080: GET /bytes/N answers N bytes (body; headers extra).
//	    Echo on TCP 8081 (what a connection sends comes back, then EOF) and
//	    UDP 8081 (each datagram is sent back).
//	echo client --tcp HOST:PORT --bytes N   sends N bytes, reads the N echoed
//	echo client --udp HOST:PORT --bytes N   one datagram of N bytes, and its echo
//	echo client --http HOST:PORT --bytes N  GET /bytes/N
//
// The client exits non-zero unless exactly N bytes came back, and prints what
// it sent and received.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	log.SetFlags(0)
	if len(os.Args) < 2 {
		log.Fatal("usage: echo serve | echo client --tcp|--udp|--http HOST:PORT --bytes N")
	}
	switch os.Args[1] {
	case "serve":
		serve()
	case "client":
		if err := client(os.Args[2:]); err != nil {
			log.Fatal(err)
		}
	default:
		log.Fatalf("unknown mode %q: serve or client", os.Args[1])
	}
}

// maxHTTPBytes bounds GET /bytes/N.
const maxHTTPBytes = 1 << 30

func serve() {
	// As a container's PID 1 it must handle SIGTERM itself: the kernel
	// ignores signals PID 1 has no handler for.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	mux := http.NewServeMux()
	mux.HandleFunc("GET /bytes/{n}", func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.ParseInt(r.PathValue("n"), 10, 64)
		if err != nil || n < 0 || n > maxHTTPBytes {
			http.Error(w, "want /bytes/N, 0 <= N <= 2^30", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		w.Header().Set("Content-Type", "application/octet-stream")
		io.CopyN(w, zeros{}, n)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	httpLn := listen("tcp", ":8080")
	go func() { log.Print(http.Serve(httpLn, mux)) }()

	tcpLn := listen("tcp", ":8081")
	go func() {
		for {
			c, err := tcpLn.Accept()
			if err != nil {
				log.Print(err)
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
				c.(*net.TCPConn).CloseWrite()
			}()
		}
	}()

	udp, err := net.ListenPacket("udp", ":8081")
	if err != nil {
		log.Fatal(err)
	}
	go func() {
		buf := make([]byte, 65536)
		for {
			n, addr, err := udp.ReadFrom(buf)
			if err != nil {
				log.Print(err)
				return
			}
			udp.WriteTo(buf[:n], addr)
		}
	}()
	log.Print("echo: HTTP on tcp :8080, echo on tcp and udp :8081")
	<-ctx.Done()
}

func listen(network, addr string) net.Listener {
	ln, err := net.Listen(network, addr)
	if err != nil {
		log.Fatal(err)
	}
	return ln
}

func client(args []string) error {
	fs := flag.NewFlagSet("client", flag.ContinueOnError)
	tcpAddr := fs.String("tcp", "", "HOST:PORT of a TCP echo server")
	udpAddr := fs.String("udp", "", "HOST:PORT of a UDP echo server")
	httpAddr := fs.String("http", "", "HOST:PORT of the HTTP server")
	n := fs.Int64("bytes", 0, "payload bytes to send (tcp, udp) or fetch (http)")
	timeout := fs.Duration("timeout", 10*time.Second, "for the whole exchange")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *n < 0 {
		return errors.New("--bytes must be >= 0")
	}
	deadline := time.Now().Add(*timeout)
	var got int64
	var err error
	switch {
	case *tcpAddr != "":
		got, err = tcpClient(*tcpAddr, *n, deadline)
	case *udpAddr != "":
		got, err = udpClient(*udpAddr, *n, deadline)
	case *httpAddr != "":
		got, err = httpClient(*httpAddr, *n, *timeout)
	default:
		return errors.New("one of --tcp, --udp, --http is needed")
	}
	if err != nil {
		return err
	}
	fmt.Printf("sent %d received %d\n", *n, got)
	if got != *n {
		return fmt.Errorf("received %d bytes, want %d", got, *n)
	}
	return nil
}

func tcpClient(addr string, n int64, deadline time.Time) (int64, error) {
	c, err := net.DialTimeout("tcp", addr, time.Until(deadline))
	if err != nil {
		return 0, err
	}
	defer c.Close()
	c.SetDeadline(deadline)
	// Send while reading: the echo comes back as it is sent, and a large N
	// would otherwise fill both sockets' buffers.
	sent := make(chan error, 1)
	go func() {
		_, err := io.CopyN(c, zeros{}, n)
		if err == nil {
			err = c.(*net.TCPConn).CloseWrite()
		}
		sent <- err
	}()
	got, err := io.Copy(io.Discard, c)
	if err != nil {
		return got, err
	}
	return got, <-sent
}

func udpClient(addr string, n int64, deadline time.Time) (int64, error) {
	if n > 65507 {
		return 0, errors.New("--udp: one datagram, at most 65507 bytes")
	}
	c, err := net.Dial("udp", addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	c.SetDeadline(deadline)
	if _, err := c.Write(make([]byte, n)); err != nil {
		return 0, err
	}
	buf := make([]byte, 65536)
	got, err := c.Read(buf)
	return int64(got), err
}

func httpClient(addr string, n int64, timeout time.Duration) (int64, error) {
	hc := &http.Client{Timeout: timeout}
	resp, err := hc.Get("http://" + strings.TrimPrefix(addr, "http://") + "/bytes/" + strconv.FormatInt(n, 10))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET /bytes/%d: %s", n, resp.Status)
	}
	return io.Copy(io.Discard, resp.Body)
}

// zeros is an endless reader of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
