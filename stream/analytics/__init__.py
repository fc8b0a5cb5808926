"""Pure fabric analytics: link index, flow observations, byte attribution, ECMP collisions and FIM."""
