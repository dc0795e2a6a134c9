# ftccl's frame decoder: the fuzzer's bytes as a peer's byte stream into a real engine with a
# posted receive (tests/cpp/ccl_internal/fake_peer.h). Needs all of ftccl (the engine itself).
faultline_fuzz_target(NAME frame SOURCES frame_fuzz.cc ${PROJECT_SOURCE_DIR}/tests/cpp/ccl_internal/fake_peer.cc LIBS ftccl INCLUDES ${PROJECT_SOURCE_DIR}/ccl/src ${PROJECT_SOURCE_DIR}/tests/cpp/ccl_internal)
