package embedded

// Unattended is the number of topics the inactive sweep visits.
func (b *Broker) Unattended() int {
	b.unattendedMu.Lock()
	defer b.unattendedMu.Unlock()
	return len(b.unattended)
}
