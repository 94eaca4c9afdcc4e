"""Operations: the transactions that apply decisions to rows, one funnel per kind of row."""
