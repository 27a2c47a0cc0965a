// Linked with the objects of one floor and the floors below it (CMakeLists.txt, "Arrows point
// down"): it builds only if none of those objects needs a symbol from a floor above.
int main() { return 0; }
