// Intentionally empty: keeps a library buildable while its folder is empty.
