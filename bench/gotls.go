// gotlsbench: the Go TLS workload of `make bench`. A TLS client and server in one process over
// an in-memory pipe (net.Pipe), after their handshake: N round trips, each a (*tls.Conn).Write
// of 120 bytes by the client and the server's (*tls.Conn).Read of them. Prints the time per
// round trip in ns (the same shape as sslbench's SSL_write + SSL_read).
//
//	gotlsbench N CERT KEY
package main

import (
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"
)

func main() {
	n, _ := strconv.Atoi(os.Args[1])
	cert, err := tls.LoadX509KeyPair(os.Args[2], os.Args[3])
	if err != nil || n <= 0 {
		fmt.Fprintln(os.Stderr, "usage: gotlsbench N CERT KEY", err)
		os.Exit(2)
	}
	a, b := net.Pipe()
	client := tls.Client(a, &tls.Config{InsecureSkipVerify: true})
	server := tls.Server(b, &tls.Config{Certificates: []tls.Certificate{cert}})
	go server.Handshake()
	if err := client.Handshake(); err != nil {
		fmt.Fprintln(os.Stderr, "gotlsbench: handshake:", err)
		os.Exit(1)
	}
	done := make(chan error)
	go func() {
		buf := make([]byte, 256)
		for i := 0; i < n; i++ {
			if _, err := server.Read(buf); err != nil {
				done <- err
				return
			}
			done <- nil
		}
	}()
	msg := make([]byte, 120)
	t0 := time.Now()
	for i := 0; i < n; i++ {
		if _, err := client.Write(msg); err != nil {
			fmt.Fprintln(os.Stderr, "gotlsbench: write:", err)
			os.Exit(1)
		}
		if err := <-done; err != nil {
			fmt.Fprintln(os.Stderr, "gotlsbench: read:", err)
			os.Exit(1)
		}
	}
	fmt.Printf("%.1f\n", float64(time.Since(t0).Nanoseconds())/float64(n))
}
