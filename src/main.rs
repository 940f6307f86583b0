mod cli;

/// Counts each thread's allocations, so that a pack script's call has a
/// memory budget (`packs::budget`).
#[global_allocator]
static ALLOCATOR: skoop::packs::CountingAllocator = skoop::packs::CountingAllocator;

fn main() -> std::process::ExitCode {
    cli::run()
}
