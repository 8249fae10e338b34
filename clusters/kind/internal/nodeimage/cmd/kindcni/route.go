package main

import (
	"encoding/binary"
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

const (
	rtmNewRoute = unix.RTM_NEWROUTE
	rtmDelRoute = unix.RTM_DELROUTE
)

// routeMessage encodes an rtnetlink request that adds-or-replaces
// (RTM_NEWROUTE) or deletes (RTM_DELROUTE) the main-table unicast route
// dst via gw.
func routeMessage(typ uint16, seq uint32, dst *net.IPNet, gw net.IP) ([]byte, error) {
	family, dstIP, gwIP := byte(unix.AF_INET), dst.IP.To4(), gw.To4()
	if dstIP == nil {
		family, dstIP, gwIP = unix.AF_INET6, dst.IP.To16(), gw.To16()
		if gw.To4() != nil {
			gwIP = nil
		}
	}
	if dstIP == nil || gwIP == nil {
		return nil, fmt.Errorf("route %s via %s: mixed or invalid address families", dst, gw)
	}
	ones, _ := dst.Mask.Size()
	flags := uint16(unix.NLM_F_REQUEST | unix.NLM_F_ACK)
	if typ == rtmNewRoute {
		flags |= unix.NLM_F_CREATE | unix.NLM_F_REPLACE
	}
	rtm := []byte{
		family,                 // rtm_family
		byte(ones),             // rtm_dst_len
		0,                      // rtm_src_len
		0,                      // rtm_tos
		unix.RT_TABLE_MAIN,     // rtm_table
		unix.RTPROT_STATIC,     // rtm_protocol
		unix.RT_SCOPE_UNIVERSE, // rtm_scope
		unix.RTN_UNICAST,       // rtm_type
		0, 0, 0, 0,             // rtm_flags
	}
	body := append(rtm, rtAttr(unix.RTA_DST, dstIP)...)
	body = append(body, rtAttr(unix.RTA_GATEWAY, gwIP)...)
	msg := make([]byte, unix.SizeofNlMsghdr, unix.SizeofNlMsghdr+len(body))
	binary.NativeEndian.PutUint32(msg[0:4], uint32(unix.SizeofNlMsghdr+len(body)))
	binary.NativeEndian.PutUint16(msg[4:6], typ)
	binary.NativeEndian.PutUint16(msg[6:8], flags)
	binary.NativeEndian.PutUint32(msg[8:12], seq)
	binary.NativeEndian.PutUint32(msg[12:16], 0)
	return append(msg, body...), nil
}

// rtAttr encodes one route attribute, padded to 4 bytes.
func rtAttr(typ uint16, data []byte) []byte {
	l := unix.SizeofRtAttr + len(data)
	b := make([]byte, (l+3)&^3)
	binary.NativeEndian.PutUint16(b[0:2], uint16(l))
	binary.NativeEndian.PutUint16(b[2:4], typ)
	copy(b[unix.SizeofRtAttr:], data)
	return b
}

var seq uint32

// routeRequest sends one route request over rtnetlink and waits for the
// kernel's acknowledgement. Deleting a route that is already gone is not an
// error.
func routeRequest(typ uint16, dst *net.IPNet, gw net.IP) error {
	seq++
	msg, err := routeMessage(typ, seq, dst, gw)
	if err != nil {
		return err
	}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	buf := make([]byte, 8192)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return err
		}
		msgs, err := parseNetlinkAcks(buf[:n])
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if m.seq != seq {
				continue
			}
			if m.errno == 0 || (typ == rtmDelRoute && m.errno == unix.ESRCH) {
				return nil
			}
			return m.errno
		}
	}
}

type netlinkAck struct {
	seq   uint32
	errno unix.Errno
}

// parseNetlinkAcks returns the NLMSG_ERROR messages (errno 0 is an ACK)
// in a netlink datagram.
func parseNetlinkAcks(b []byte) ([]netlinkAck, error) {
	var out []netlinkAck
	for len(b) >= unix.SizeofNlMsghdr {
		l := binary.NativeEndian.Uint32(b[0:4])
		if l < unix.SizeofNlMsghdr || int(l) > len(b) {
			return nil, fmt.Errorf("netlink: bad message length %d", l)
		}
		if binary.NativeEndian.Uint16(b[4:6]) == unix.NLMSG_ERROR && l >= unix.SizeofNlMsghdr+4 {
			code := int32(binary.NativeEndian.Uint32(b[16:20]))
			out = append(out, netlinkAck{seq: binary.NativeEndian.Uint32(b[8:12]), errno: unix.Errno(-code)})
		}
		next := (int(l) + 3) &^ 3
		if next > len(b) {
			break
		}
		b = b[next:]
	}
	return out, nil
}
