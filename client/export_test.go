package client

import "time"

// SetKeyRefresh sets how long c's hub, shared with its copies, trusts the
// audit keys it read before it reads them again.
func SetKeyRefresh(c *Client, d time.Duration) {
	c.hub.mu.Lock()
	defer c.hub.mu.Unlock()
	c.hub.keysEvery = d
}

// DropHub unsubscribes c's hub now, as it does once idle, if no call
// waits: the next call subscribes it again.
func DropHub(c *Client) { c.hub.drop() }
