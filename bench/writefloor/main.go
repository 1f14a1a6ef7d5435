// Command writefloor measures the floor under stream fan-out on this
// machine: the cost of one write(2) of a stream-line-sized buffer to a
// loopback TCP socket, from one thread in a tight loop over N connected
// sockets, while another thread (on another CPU) reads them all through
// epoll. No HTTP, no Go scheduling, no encoding: what delivering one line
// to N subscribers costs at least on one core.
//
//	writefloor -n 10000 -size 750 -rounds 5 -writer-cpu 0 -reader-cpu 1 [-busy-poll]
//
// prints one line (median and range over rounds, after one warm-up round):
//
//	RESULT n=N size=B us_per_write=F min_us=F max_us=F ms_per_round=F busy_poll=0|1
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"runtime"
	"slices"
	"syscall"
	"time"
	"unsafe"
)

func main() {
	n := flag.Int("n", 10000, "connections")
	size := flag.Int("size", 750, "bytes per write (a stream line is ~750)")
	rounds := flag.Int("rounds", 5, "measured rounds (one write to every connection each)")
	wcpu := flag.Int("writer-cpu", 0, "CPU of the writing thread")
	rcpu := flag.Int("reader-cpu", 1, "CPU of the reading thread")
	busy := flag.Bool("busy-poll", false, "the reader polls without sleeping (epoll_wait timeout 0)")
	flag.Parse()
	if err := run(*n, *size, *rounds, *wcpu, *rcpu, *busy); err != nil {
		fmt.Fprintln(os.Stderr, "writefloor:", err)
		os.Exit(1)
	}
}

func pin(cpu int) error {
	var set [16]uint64
	set[cpu/64] = 1 << (cpu % 64)
	_, _, e := syscall.RawSyscall(syscall.SYS_SCHED_SETAFFINITY, 0, uintptr(len(set)*8), uintptr(unsafe.Pointer(&set)))
	if e != 0 {
		return e
	}
	return nil
}

func run(n, size, rounds, wcpu, rcpu int, busy bool) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	addr := ln.Addr().(*net.TCPAddr)
	accepted := make(chan []*os.File, 1)
	go func() {
		var fs []*os.File
		for range n {
			c, err := ln.Accept()
			if err != nil {
				break
			}
			f, err := c.(*net.TCPConn).File() // a blocking dup of the socket
			c.Close()
			if err != nil {
				break
			}
			fs = append(fs, f)
		}
		accepted <- fs
	}()
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return err
	}
	var clients []int
	for range n {
		fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		sa := &syscall.SockaddrInet4{Port: addr.Port}
		copy(sa.Addr[:], addr.IP.To4())
		if err := syscall.Connect(fd, sa); err != nil {
			return err
		}
		if err := syscall.SetNonblock(fd, true); err != nil {
			return err
		}
		if err := syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, fd, &syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(fd)}); err != nil {
			return err
		}
		clients = append(clients, fd)
	}
	files := <-accepted
	if len(files) != n {
		return fmt.Errorf("accepted %d of %d connections", len(files), n)
	}
	timeout := 50
	if busy {
		timeout = 0
	}
	go func() {
		runtime.LockOSThread()
		if err := pin(rcpu); err != nil {
			fmt.Fprintln(os.Stderr, "writefloor: reader:", err)
		}
		ev := make([]syscall.EpollEvent, 1024)
		buf := make([]byte, 64<<10)
		for {
			k, err := syscall.EpollWait(epfd, ev, timeout)
			if err != nil && err != syscall.EINTR {
				return
			}
			for j := 0; j < k; j++ {
				for {
					m, err := syscall.Read(int(ev[j].Fd), buf)
					if err != nil || m <= 0 {
						break
					}
				}
			}
		}
	}()
	runtime.LockOSThread()
	if err := pin(wcpu); err != nil {
		return err
	}
	fds := make([]int, n)
	for i, f := range files {
		fds[i] = int(f.Fd())
	}
	msg := make([]byte, size)
	var per []float64
	var total []float64
	for round := 0; round <= rounds; round++ {
		t := time.Now()
		for _, fd := range fds {
			if _, err := syscall.Write(fd, msg); err != nil {
				return err
			}
		}
		el := time.Since(t)
		if round > 0 { // round 0 warms up
			per = append(per, float64(el.Nanoseconds())/1e3/float64(n))
			total = append(total, float64(el.Nanoseconds())/1e6)
		}
		time.Sleep(200 * time.Millisecond)
	}
	slices.Sort(per)
	slices.Sort(total)
	fmt.Printf("RESULT n=%d size=%d us_per_write=%.2f min_us=%.2f max_us=%.2f ms_per_round=%.1f busy_poll=%d\n",
		n, size, per[len(per)/2], per[0], per[len(per)-1], total[len(total)/2], map[bool]int{false: 0, true: 1}[busy])
	for _, f := range files {
		f.Close()
	}
	for _, fd := range clients {
		syscall.Close(fd)
	}
	return nil
}
