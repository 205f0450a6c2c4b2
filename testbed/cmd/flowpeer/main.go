// Command flowpeer is the testbed's traffic tool: a TCP/UDP server that reads
// everything and answers with a fixed number of bytes, and a client that sends
// an exact number of bytes from an optional fixed source port, so tests know
// the byte counts conntrack must report. With -pull the client asks the server
// for a long answer written slowly instead (a download: the bulk of the bytes
// in the reply direction).
//
//	flowpeer serve -listen [::]:8080 [-reply 1000]             # TCP and UDP on the same port
//	flowpeer send -proto tcp|udp -to 10.96.0.10:80 -bytes 5000 [-sport 40000] [-hold 2s] [-over 10s]
//	flowpeer send -proto tcp -to 10.244.2.11:8080 -pull 300000 -over 12s [-sport 40000]
//	flowpeer ping -to 10.244.2.11 -id 4660 [-count 3] [-size 56] [-interval 100ms]
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: flowpeer serve|send|ping [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "send":
		err = send(os.Args[2:])
	case "ping":
		err = ping(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "flowpeer:", err)
		os.Exit(1)
	}
}

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	listen := fs.String("listen", "[::]:8080", "address for TCP and UDP")
	reply := fs.Int("reply", 1000, "bytes answered to each TCP connection / UDP datagram")
	_ = fs.Parse(args)

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	pc, err := net.ListenPacket("udp", *listen)
	if err != nil {
		return err
	}
	answer := make([]byte, *reply)
	go func() {
		buf := make([]byte, 65535)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo(answer, from)
		}
	}()
	fmt.Println("ready")
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go func() {
			defer c.Close()
			var req bytes.Buffer
			_, _ = io.Copy(&req, c) // until the client half-closes
			if n, over, ok := parsePull(req.Bytes()); ok {
				_ = write(c, n, over)
				return
			}
			_, _ = c.Write(answer)
		}()
	}
}

func send(args []string) error {
	fs := flag.NewFlagSet("send", flag.ExitOnError)
	proto := fs.String("proto", "tcp", "tcp or udp")
	to := fs.String("to", "", "destination host:port")
	n := fs.Int("bytes", 1000, "payload bytes to send (UDP: one datagram)")
	sport := fs.Int("sport", 0, "source port (0: any)")
	hold := fs.Duration("hold", 0, "keep the connection open this long after sending (TCP)")
	timeout := fs.Duration("timeout", 5*time.Second, "give up after")
	over := fs.Duration("over", 0, "send the bytes in 1000-byte writes spread evenly over this long (TCP): a long-lived transfer")
	pull := fs.Int("pull", 0, "ask the server for this many bytes, written in 1000-byte writes spread over -over (TCP): a long download; -bytes is then not sent")
	_ = fs.Parse(args)

	d := net.Dialer{Timeout: *timeout}
	switch *proto {
	case "tcp":
		d.LocalAddr = &net.TCPAddr{Port: *sport}
	case "udp":
		d.LocalAddr = &net.UDPAddr{Port: *sport}
	default:
		return fmt.Errorf("proto %q: want tcp or udp", *proto)
	}
	c, err := d.Dial(*proto, *to)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(*timeout + *hold + *over))
	if *pull > 0 {
		if *proto != "tcp" {
			return fmt.Errorf("-pull: TCP only (got %s)", *proto)
		}
		if _, err := c.Write(pullRequest(*pull, *over)); err != nil {
			return err
		}
	} else if err := write(c, *n, *over); err != nil {
		return err
	}
	if *proto == "udp" {
		got, err := c.Read(make([]byte, 65535))
		fmt.Println("received", got)
		return err
	}
	time.Sleep(*hold)
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		return err
	}
	got, err := io.Copy(io.Discard, c)
	fmt.Println("received", got)
	return err
}

// write sends n bytes at once, or in 1000-byte writes spread evenly over the duration over.
func write(c net.Conn, n int, over time.Duration) error {
	if over <= 0 {
		_, err := c.Write(make([]byte, n))
		return err
	}
	const chunk = 1000
	writes := (n + chunk - 1) / chunk
	start := time.Now()
	for i := range writes {
		time.Sleep(time.Until(start.Add(over * time.Duration(i) / time.Duration(writes))))
		if _, err := c.Write(make([]byte, min(chunk, n-i*chunk))); err != nil {
			return err
		}
	}
	return nil
}

// pullPrefix starts a client's request for a slow answer: "<prefix><bytes> <over>\n".
const pullPrefix = "flowpeer-pull "

func pullRequest(n int, over time.Duration) []byte {
	return fmt.Appendf(nil, "%s%d %s\n", pullPrefix, n, over)
}

// parsePull reads a pull request; ok is false for any other payload.
func parsePull(req []byte) (n int, over time.Duration, ok bool) {
	rest, found := bytes.CutPrefix(req, []byte(pullPrefix))
	if !found {
		return 0, 0, false
	}
	var d string
	if _, err := fmt.Sscanf(string(rest), "%d %s\n", &n, &d); err != nil || n <= 0 {
		return 0, 0, false
	}
	over, err := time.ParseDuration(d)
	return n, over, err == nil
}
