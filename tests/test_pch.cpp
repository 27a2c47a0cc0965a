// The translation unit that lazycl_test_pch (tests/CMakeLists.txt) builds its precompiled
// header with; it holds no code.
