package fleet

// LocalAccounts returns how many shared-budget accounts l keeps.
func LocalAccounts(l *Local) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.accounts)
}
