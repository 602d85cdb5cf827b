package engine

// AppendRetries is how many times an append whose outcome is unknown is
// resent before the partition realigns, for the black-box tests.
const AppendRetries = appendRetries
