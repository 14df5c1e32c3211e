package cli

import (
	"context"
	"net"
	"os"
	"strconv"
	"time"
)

// Notify sends a state string (READY=1, STOPPING=1, WATCHDOG=1, STATUS=…) to
// systemd when the process runs under a Type=notify unit; it does nothing
// elsewhere. It speaks the sd_notify datagram protocol directly, so no libsystemd
// is linked.
func Notify(state string) error {
	path := os.Getenv("NOTIFY_SOCKET")
	if path == "" {
		return nil
	}
	if path[0] == '@' { // abstract socket namespace
		path = "\x00" + path[1:]
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = conn.Write([]byte(state))
	return err
}

// startWatchdog pings systemd's watchdog at half the interval it asked for
// (WATCHDOG_USEC), while ctx lives. A hung process stops pinging and systemd
// restarts it.
func startWatchdog(ctx context.Context) (stop func()) {
	usec, err := strconv.ParseInt(os.Getenv("WATCHDOG_USEC"), 10, 64)
	if err != nil || usec <= 0 {
		return func() {}
	}
	if pid := os.Getenv("WATCHDOG_PID"); pid != "" && pid != strconv.Itoa(os.Getpid()) {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		t := time.NewTicker(time.Duration(usec) * time.Microsecond / 2)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				_ = Notify("WATCHDOG=1")
			}
		}
	}()
	return cancel
}
