package nftnl

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The socket side: nf_tables messages written into one
// NFNL_MSG_BATCH_BEGIN … NFNL_MSG_BATCH_END batch, sent with one sendmsg
// (the kernel handles a batch per sendmsg: nfnetlink_rcv_batch in
// net/netfilter/nfnetlink.c aborts one whose END is not in the same
// message buffer), committed whole or not at all. That is how nft sends
// its transactions too (libmnl batches, SO_SNDBUFFORCE sized to the
// batch), minus the text. Requests and dumps (the GET messages) go over
// the same socket, one at a time.

const (
	nlmsgHdrLen = 16
	nfgenHdrLen = 4
	nlaHdrLen   = 4
	nlaFNested  = 0x8000
	nfprotoInet = 1
	chunkSize   = 1 << 20 // batch buffers: messages never span two
	elemListMax = 60000   // element bytes per NEWSETELEM: the list attribute's length is a u16
	// Answers come one per skb: acks and errors are small, dump skbs
	// at most 32 KiB (netlink_dump caps max_recvmsg_len).
	recvBufBytes = 64 << 10
	firstChunk   = 64 << 10 // a partial sync's batch is small
)

// msgBuf builds netlink attributes; nested ones are opened and closed.
type msgBuf struct{ b []byte }

func (m *msgBuf) align() {
	for len(m.b)%4 != 0 {
		m.b = append(m.b, 0)
	}
}

func (m *msgBuf) attr(typ uint16, data []byte) {
	m.b = binary.NativeEndian.AppendUint16(m.b, uint16(nlaHdrLen+len(data)))
	m.b = binary.NativeEndian.AppendUint16(m.b, typ)
	m.b = append(m.b, data...)
	m.align()
}

func (m *msgBuf) str(typ uint16, s string) {
	m.b = binary.NativeEndian.AppendUint16(m.b, uint16(nlaHdrLen+len(s)+1))
	m.b = binary.NativeEndian.AppendUint16(m.b, typ)
	m.b = append(m.b, s...)
	m.b = append(m.b, 0)
	m.align()
}

func (m *msgBuf) u32(typ uint16, v uint32) {
	m.b = binary.NativeEndian.AppendUint16(m.b, nlaHdrLen+4)
	m.b = binary.NativeEndian.AppendUint16(m.b, typ)
	m.b = binary.BigEndian.AppendUint32(m.b, v)
}

func (m *msgBuf) u64(typ uint16, v uint64) {
	m.attr(typ, binary.BigEndian.AppendUint64(nil, v))
}

// begin opens a nested attribute; end closes it (and pads).
func (m *msgBuf) begin(typ uint16) int { return m.open(typ | nlaFNested) }

// open starts an attribute whose value the caller appends to m.b.
func (m *msgBuf) open(typ uint16) int {
	at := len(m.b)
	m.b = binary.NativeEndian.AppendUint16(m.b, 0)
	m.b = binary.NativeEndian.AppendUint16(m.b, typ)
	return at
}

func (m *msgBuf) end(at int) {
	binary.NativeEndian.PutUint16(m.b[at:], uint16(len(m.b)-at))
	m.align()
}

// batch is a transaction being encoded: whole netlink messages in
// chunks of at most chunkSize bytes, sent together with one sendmsg.
type batch struct {
	chunks [][]byte
	seq    uint32 // of the last message
	first  uint32 // of BATCH_BEGIN
	ack    uint32 // of the message whose ack ends the batch
	// what each message is, by sequence number, for errors: its
	// nf_tables type and the object it names.
	kind []uint16
	what []string
	n    int // messages, BEGIN and END excluded
	// off holds the chunks after the first, which live outside the Go
	// heap (mmap) until release: a full sync's 11 MiB batch then does
	// not count in the live heap the GC doubles into its goal (issue 16).
	off *offHeap
}

// offHeap is memory mapped for a batch, unmapped by release or, for a
// batch dropped unsent, by a cleanup once the batch is unreachable.
type offHeap struct{ chunks [][]byte }

func (o *offHeap) free() {
	for _, c := range o.chunks {
		_ = unix.Munmap(c[:cap(c)])
	}
	o.chunks = nil
}

// chunk returns an empty buffer of capacity n: mapped memory for the
// large chunks, heap memory if mapping fails.
func (b *batch) chunk(n int) []byte {
	if n < chunkSize {
		return make([]byte, 0, n)
	}
	c, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return make([]byte, 0, n)
	}
	if b.off == nil {
		b.off = &offHeap{}
		runtime.AddCleanup(b, (*offHeap).free, b.off)
	}
	b.off.chunks = append(b.off.chunks, c[:0])
	return c[:0]
}

// release unmaps the batch's mapped chunks; the batch holds no messages
// after it.
func (b *batch) release() {
	b.chunks = nil
	if b.off != nil {
		b.off.free()
	}
}

// newBatch returns a batch numbered from 1; send renumbers it after the
// socket's last exchange.
func newBatch() *batch {
	b := &batch{first: 1, seq: 0}
	b.message(unix.NFNL_MSG_BATCH_BEGIN, unix.NLM_F_REQUEST, unix.AF_UNSPEC, unix.NFNL_SUBSYS_NFTABLES, nil, "batch")
	b.n = 0
	return b
}

// message appends one message with the nfgenmsg header and attrs.
func (b *batch) message(typ, flags uint16, family uint8, resID uint16, attrs []byte, what string) {
	size := nlmsgHdrLen + nfgenHdrLen + len(attrs)
	if len(b.chunks) == 0 || cap(b.chunks[len(b.chunks)-1])-len(b.chunks[len(b.chunks)-1]) < size {
		n := chunkSize
		if len(b.chunks) == 0 {
			n = firstChunk
		}
		b.chunks = append(b.chunks, b.chunk(max(n, size)))
	}
	c := b.chunks[len(b.chunks)-1]
	b.seq++
	c = binary.NativeEndian.AppendUint32(c, uint32(size))
	c = binary.NativeEndian.AppendUint16(c, typ)
	c = binary.NativeEndian.AppendUint16(c, flags)
	c = binary.NativeEndian.AppendUint32(c, b.seq)
	c = binary.NativeEndian.AppendUint32(c, 0)
	c = append(c, family, 0)
	c = binary.BigEndian.AppendUint16(c, resID)
	c = append(c, attrs...)
	b.chunks[len(b.chunks)-1] = c
	b.kind = append(b.kind, typ)
	b.what = append(b.what, what)
	b.n++
}

// nft appends an nf_tables message of type msg (NFT_MSG_*).
func (b *batch) nft(msg int, flags uint16, attrs []byte, what string) {
	b.message(uint16(unix.NFNL_SUBSYS_NFTABLES<<8|msg), unix.NLM_F_REQUEST|flags, nfprotoInet, 0, attrs, what)
}

// finish asks for an ack of the last message and closes the batch.
func (b *batch) finish() {
	if b.n > 0 {
		c := b.chunks[len(b.chunks)-1]
		// Find the last message: walk the last chunk.
		var last int
		for at := 0; at < len(c); at += int(binary.NativeEndian.Uint32(c[at:])) {
			last = at
		}
		flags := binary.NativeEndian.Uint16(c[last+6:])
		binary.NativeEndian.PutUint16(c[last+6:], flags|unix.NLM_F_ACK)
		b.ack = b.seq
	}
	n := b.n
	b.message(unix.NFNL_MSG_BATCH_END, unix.NLM_F_REQUEST, unix.AF_UNSPEC, unix.NFNL_SUBSYS_NFTABLES, nil, "batch end")
	b.n = n
}

// renumber gives the batch's messages the sequence numbers from first
// on.
func (b *batch) renumber(first uint32) {
	delta := first - b.first
	if delta == 0 {
		return
	}
	for _, c := range b.chunks {
		for at := 0; at+nlmsgHdrLen <= len(c); at += int(binary.NativeEndian.Uint32(c[at:])) {
			binary.NativeEndian.PutUint32(c[at+8:], binary.NativeEndian.Uint32(c[at+8:])+delta)
		}
	}
	b.first += delta
	b.seq += delta
	if b.ack != 0 {
		b.ack += delta
	}
}

func (b *batch) bytes() int {
	n := 0
	for _, c := range b.chunks {
		n += len(c)
	}
	return n
}

// socket is a NETLINK_NETFILTER socket, bound to the network namespace
// it was opened in.
type socket struct {
	mu      sync.Mutex
	fd      int
	closed  bool
	seq     uint32
	buf     []byte // receive buffer, dropped after each exchange
	cleanup runtime.Cleanup
}

// close closes the socket now instead of when it is collected.
func (s *socket) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.cleanup.Stop()
	return unix.Close(s.fd)
}

var errClosed = errors.New("netlink: the connection is closed")

func openNetlink() (*socket, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
	if err != nil {
		return nil, fmt.Errorf("netlink socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("netlink bind: %w", err)
	}
	// Errors of a failed batch come back together: room for many. (The
	// forced size needs CAP_NET_ADMIN, which programming nftables needs
	// anyway; fall back to what an unprivileged socket may have.)
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 4<<20) != nil {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 4<<20)
	}
	// Report errors with the failing message only, not a copy of it.
	_ = unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_CAP_ACK, 1)
	_ = unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_EXT_ACK, 1)
	s := &socket{fd: fd, seq: uint32(time.Now().Unix())}
	// A Conn dropped without Close (the proxy's Backend has none: it is
	// used for the life of the process) frees its socket when collected.
	s.cleanup = runtime.AddCleanup(s, func(fd int) { unix.Close(fd) }, fd)
	return s, nil
}

// Error is an error the kernel returned for one message: of a batch (the
// operation and the object it named) or of a request. It unwraps to its
// errno: errors.Is(err, unix.ENOENT) says an object was missing
// (IsNotFound), unix.EEXIST that a created one was there.
type Error struct {
	Errno unix.Errno
	// What names the failed message: "add chain prerouting", "delete
	// elements of hostports-v4", "list table inet nodenet", ...
	What string
	// Msg is the kernel's extended ack message, if any.
	Msg string
}

func (e *Error) Error() string {
	s := e.What + ": " + e.Errno.Error()
	if e.Msg != "" {
		s += " (" + e.Msg + ")"
	}
	return s
}

func (e *Error) Unwrap() error { return e.Errno }

// send sends b with one sendmsg and waits for the kernel's verdict on
// it: the ack of the last message, or the first error.
func (s *socket) send(ctx context.Context, b *batch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if b.ack == 0 {
		return nil // nothing to commit
	}
	// Numbered after every earlier exchange, so late answers to those
	// are told apart.
	b.renumber(s.seq + 1)
	size := b.bytes()
	// netlink_sendmsg refuses a message larger than the send buffer;
	// the kernel doubles what is asked for.
	if err := unix.SetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, size); err != nil {
		if err := unix.SetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_SNDBUF, size); err != nil {
			return fmt.Errorf("netlink: send buffer of %d bytes: %w", size, err)
		}
	}
	n, err := unix.SendmsgBuffers(s.fd, b.chunks, nil, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}, 0)
	if err != nil {
		return fmt.Errorf("netlink: send a batch of %d messages (%d bytes): %w", b.n, size, err)
	}
	s.seq = b.seq
	if n != size {
		return fmt.Errorf("netlink: sent %d of %d bytes", n, size)
	}
	var first error
	err = s.receive(ctx, func(h nlHeader, data []byte) (bool, error) {
		if h.typ != unix.NLMSG_ERROR {
			return false, nil
		}
		errno, seq, msg := parseAck(data)
		if seq < b.first || seq > b.ack {
			return false, nil // left over from an earlier exchange
		}
		if errno != 0 && first == nil {
			what := "batch"
			if i := int(seq - b.first); i > 0 && i < len(b.what) {
				what = msgNames[b.kind[i]&0xff] + " " + b.what[i]
			}
			first = &Error{Errno: errno, What: what, Msg: msg}
		}
		// The kernel answers every message of the batch before the
		// ack of the last one; an error on BEGIN is a failed commit.
		return seq == b.ack || (errno != 0 && seq == b.first), nil
	})
	if first != nil {
		return first
	}
	return err
}

// msgNames name the nf_tables messages a batch holds, for errors.
var msgNames = map[uint16]string{
	unix.NFT_MSG_NEWTABLE: "add table", unix.NFT_MSG_DELTABLE: "delete table",
	unix.NFT_MSG_NEWCHAIN: "add chain", unix.NFT_MSG_DELCHAIN: "delete chain",
	unix.NFT_MSG_NEWRULE: "add rule to chain", unix.NFT_MSG_DELRULE: "delete rules of chain",
	unix.NFT_MSG_NEWSET: "add set", unix.NFT_MSG_DELSET: "delete set",
	unix.NFT_MSG_NEWSETELEM: "add elements to", unix.NFT_MSG_DELSETELEM: "delete elements of",
}

type nlHeader struct {
	typ, flags uint16
	seq        uint32
}

// receive reads messages into fn until it reports done, a dump ends, or
// the socket fails.
func (s *socket) receive(ctx context.Context, fn func(nlHeader, []byte) (done bool, err error)) error {
	if s.buf == nil {
		s.buf = make([]byte, recvBufBytes)
	}
	defer func() { s.buf = nil }()
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(30 * time.Second)
	}
	for {
		tv := unix.NsecToTimeval(max(time.Until(deadline), time.Millisecond).Nanoseconds())
		_ = unix.SetsockoptTimeval(s.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
		n, _, err := unix.Recvfrom(s.fd, s.buf, 0)
		if err != nil {
			if errors.Is(err, unix.EAGAIN) {
				return fmt.Errorf("netlink: no answer from the kernel: %w", os.ErrDeadlineExceeded)
			}
			return fmt.Errorf("netlink: receive: %w", err)
		}
		for p := s.buf[:n]; len(p) >= nlmsgHdrLen; {
			l := int(binary.NativeEndian.Uint32(p))
			if l < nlmsgHdrLen || l > len(p) {
				return errors.New("netlink: truncated message")
			}
			h := nlHeader{typ: binary.NativeEndian.Uint16(p[4:]), flags: binary.NativeEndian.Uint16(p[6:]), seq: binary.NativeEndian.Uint32(p[8:])}
			if h.typ == unix.NLMSG_DONE {
				return nil
			}
			done, err := fn(h, p[nlmsgHdrLen:l])
			if err != nil || done {
				return err
			}
			p = p[(l+3)&^3:]
		}
	}
}

// parseAck reads an NLMSG_ERROR payload: errno (0: an ack), the
// sequence number it answers and the extended ack message.
func parseAck(data []byte) (unix.Errno, uint32, string) {
	if len(data) < 4+nlmsgHdrLen {
		return unix.EINVAL, 0, ""
	}
	code := int32(binary.NativeEndian.Uint32(data))
	seq := binary.NativeEndian.Uint32(data[4+8:])
	var msg string
	// With NETLINK_CAP_ACK the original message is not echoed; the
	// extended ack attributes follow the header.
	for p := data[4+nlmsgHdrLen:]; len(p) >= nlaHdrLen; {
		l := int(binary.NativeEndian.Uint16(p))
		if l < nlaHdrLen || l > len(p) {
			break
		}
		if binary.NativeEndian.Uint16(p[2:])&^nlaFNested == unix.NLMSGERR_ATTR_MSG {
			msg = string(trimNul(p[nlaHdrLen:l]))
		}
		p = p[min((l+3)&^3, len(p)):]
	}
	return unix.Errno(-code), seq, msg
}

func trimNul(b []byte) []byte {
	for len(b) > 0 && b[len(b)-1] == 0 {
		b = b[:len(b)-1]
	}
	return b
}

// request sends one nf_tables request (a dump with unix.NLM_F_DUMP) and
// hands every answer's attributes to fn; what names it in errors.
func (s *socket) request(ctx context.Context, msg int, flags uint16, attrs []byte, what string, fn func(attrs []byte)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.seq++
	seq := s.seq
	m := make([]byte, 0, nlmsgHdrLen+nfgenHdrLen+len(attrs))
	m = binary.NativeEndian.AppendUint32(m, uint32(nlmsgHdrLen+nfgenHdrLen+len(attrs)))
	m = binary.NativeEndian.AppendUint16(m, uint16(unix.NFNL_SUBSYS_NFTABLES<<8|msg))
	m = binary.NativeEndian.AppendUint16(m, unix.NLM_F_REQUEST|unix.NLM_F_ACK|flags)
	m = binary.NativeEndian.AppendUint32(m, seq)
	m = binary.NativeEndian.AppendUint32(m, 0)
	m = append(m, nfprotoInet, 0, 0, 0)
	m = append(m, attrs...)
	if err := unix.Sendto(s.fd, m, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("netlink: request: %w", err)
	}
	return s.receive(ctx, func(h nlHeader, data []byte) (bool, error) {
		if h.seq != seq {
			return false, nil // a late answer to an earlier exchange
		}
		if h.typ == unix.NLMSG_ERROR {
			errno, _, m := parseAck(data)
			if errno != 0 {
				return true, &Error{Errno: errno, What: what, Msg: m}
			}
			return true, nil
		}
		if len(data) >= nfgenHdrLen {
			fn(data[nfgenHdrLen:])
		}
		return false, nil
	})
}

// attrs calls fn for each attribute in b.
func attrs(b []byte, fn func(typ uint16, data []byte)) {
	for len(b) >= nlaHdrLen {
		l := int(binary.NativeEndian.Uint16(b))
		if l < nlaHdrLen || l > len(b) {
			return
		}
		fn(binary.NativeEndian.Uint16(b[2:])&^nlaFNested, b[nlaHdrLen:l])
		b = b[min((l+3)&^3, len(b)):]
	}
}
