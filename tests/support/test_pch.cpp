// The program that compiles tests/support/test_pch.h into the precompiled
// header the test programs reuse (tests/CMakeLists.txt); it is never run.
int main() { return 0; }
