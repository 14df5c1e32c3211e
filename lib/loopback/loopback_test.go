package loopback

import "testing"

func TestPort(t *testing.T) {
	for addr, wantPort := range map[string]int{"127.0.0.1:9092": 9092, "localhost:0": 0, "[::1]:30000": 30000, "127.0.0.2:1": 1} {
		if p, err := Port(addr); err != nil || p != wantPort {
			t.Errorf("Port(%q) = %d, %v", addr, p, err)
		}
	}
	for _, addr := range []string{"0.0.0.0:9092", ":9092", "10.0.0.5:30000", "example.com:80", "[::]:1", "127.0.0.1", "127.0.0.1:http", "127.0.0.1:70000"} {
		if _, err := Port(addr); err == nil {
			t.Errorf("Port(%q) accepted", addr)
		}
	}
}
