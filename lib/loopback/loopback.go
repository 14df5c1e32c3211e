// Package loopback holds the one check that the development servers (tau2-broker's embedded
// Kafka, tau2-scripted-llm and the llmtest server behind it) listen on loopback only.
package loopback

import (
	"fmt"
	"net"
	"strconv"
)

// Port checks that addr (host:port) is a loopback listen address and returns its port.
// The development servers (tau2-broker, tau2-scripted-llm) have no authentication: the embedded
// broker accepts any client, and the scripted LLM's weight-update endpoints change its state for
// anyone who can reach them. Binding them to loopback is their only access control, so a
// non-loopback address (0.0.0.0, a LAN IP, an empty host) is a configuration error.
func Port(addr string) (int, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, fmt.Errorf("addr %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return 0, fmt.Errorf("addr %q: this development server has no authentication and listens on loopback only (127.0.0.1 or ::1)", addr)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return 0, fmt.Errorf("addr %q: port %q is not a number in 0..65535", addr, portStr)
	}
	return port, nil
}
