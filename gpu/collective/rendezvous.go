package collective

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// The multi-host rendezvous: every rank of an NCCL world needs the same unique id, which rank 0
// makes. Rather than a new service (etcd, a key-value store), the process of host 0 serves the id
// over a TCP port named in every host's config until each other host has fetched it; the others
// dial that address, retrying until host 0 is up. One exchange per host and start:
//
//	follower → "tau2rl-rendezvous/1 <job> <host>\n"
//	host 0   → "ok <id as hex>\n"   or   "error <reason>\n"
//
// The job name keeps two trainers that share a host and port by mistake from joining each other.

const rendezvousProto = "tau2rl-rendezvous/1"

// ServeID serves id on ln to hosts−1 followers (hosts 1 … hosts−1 of job), each once, and returns
// when all have fetched it, ctx ends, or ln fails. It closes ln on return.
func ServeID(ctx context.Context, ln net.Listener, job string, hosts int, id []byte) error {
	defer ln.Close()
	if hosts < 2 {
		return nil
	}
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	served := map[int]bool{}
	for len(served) < hosts-1 {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("collective: rendezvous: %d of %d hosts fetched the id: %w", len(served), hosts-1, ctx.Err())
			}
			return fmt.Errorf("collective: rendezvous: %w", err)
		}
		host, err := serveOne(conn, job, hosts, id)
		if err == nil {
			served[host] = true
		}
	}
	return nil
}

func serveOne(conn net.Conn, job string, hosts int, id []byte) (int, error) {
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return 0, err
	}
	reply := func(format string, a ...any) error {
		_, err := fmt.Fprintf(conn, format+"\n", a...)
		return err
	}
	f := strings.Fields(line)
	if len(f) != 3 || f[0] != rendezvousProto {
		reply("error expected %q", rendezvousProto+" <job> <host>")
		return 0, errors.New("bad request")
	}
	if f[1] != job {
		reply("error this is job %q, not %q", job, f[1])
		return 0, errors.New("wrong job")
	}
	host, err := strconv.Atoi(f[2])
	if err != nil || host < 1 || host >= hosts {
		reply("error host %q outside [1,%d)", f[2], hosts)
		return 0, errors.New("bad host")
	}
	if err := reply("ok %s", hex.EncodeToString(id)); err != nil {
		return 0, err
	}
	return host, nil
}

// FetchID asks host 0 of job at addr for the unique id, as host `host`, retrying connection
// failures every interval until ctx ends (host 0 may start later). A refusal by host 0 (wrong
// job, bad host number) is returned at once.
func FetchID(ctx context.Context, addr, job string, host int, interval time.Duration) ([]byte, error) {
	var d net.Dialer
	for {
		id, err, retry := fetchOnce(ctx, &d, addr, job, host)
		if err == nil || !retry {
			return id, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("collective: rendezvous with %s: %w (last error: %v)", addr, ctx.Err(), err)
		case <-time.After(interval):
		}
	}
}

func fetchOnce(ctx context.Context, d *net.Dialer, addr, job string, host int) ([]byte, error, bool) {
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err, true
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(conn, "%s %s %d\n", rendezvousProto, job, host); err != nil {
		return nil, err, true
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return nil, err, true
	}
	line = strings.TrimSpace(line)
	if rest, ok := strings.CutPrefix(line, "ok "); ok {
		id, err := hex.DecodeString(rest)
		if err != nil {
			return nil, fmt.Errorf("collective: rendezvous with %s: bad id: %w", addr, err), false
		}
		return id, nil, false
	}
	return nil, fmt.Errorf("collective: rendezvous with %s refused: %s", addr, line), false
}
