"""Quarterly SLA audit reports: exports, their checksums and the log of who exported what."""
