//! Content builders for the `waas-3g` file set: Office 97-2003 style
//! compound files (`.doc`, `.xls`, `.ppt`) and a zip archive.
//!
//! The reference's files are binary Office documents (every size in its
//! Table 1 is a multiple of 512, the compound-file sector size). What a WAN
//! optimizer sees in such files, and what these builders reproduce:
//!
//! - a compound-file skeleton: a 512-byte header, streams padded to whole
//!   sectors, a sector allocation table (chains of sector numbers) and a
//!   directory of 128-byte entries with UTF-16 names;
//! - Word: 8-bit English text (paragraphs of sentences whose words recur
//!   with a Zipf-like frequency), formatting pages (FKPs) drawn from a small
//!   palette of property runs, a style sheet and font table in UTF-16, and
//!   embedded pictures (JPEG headers over random bytes: already compressed);
//! - Excel: BIFF8-like records (row, cell, shared-string, formula records),
//!   a shared string table of labels that recur, integers, dates and prices
//!   from a price list, computed amounts whose IEEE-754 bytes look random,
//!   and rarely a picture;
//! - PowerPoint: slide records with UTF-16 titles and bullets and repetitive
//!   shape properties, but mostly embedded pictures, so it compresses little;
//! - zip: local headers, deflated (here: random) data, a central directory:
//!   it does not compress at all.
//!
//! Every byte comes from [`Rng`] seeded by the caller: same seed, same file.

use super::compound::{
    capacity, compound, fit, pictures, put_f64, put_u16, put_u32, put_utf16, sectors_floor,
    summary, Stream, SECTOR,
};
use super::text::{capitalized, sentence, text, NAMES, PLACES, WORDS};
use crate::rng::Rng;

/// Word's formatting pages: 512-byte FKPs whose property runs come from a
/// small palette, plus a style sheet and a font table; exactly `len` bytes.
fn word_table(rng: &mut Rng, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + SECTOR);
    // Style sheet and font table (UTF-16 names), as the "1Table" stream starts.
    let styles = [
        "Normal",
        "Heading 1",
        "Heading 2",
        "Heading 3",
        "Default Paragraph Font",
        "Table Normal",
        "No List",
        "Body Text",
        "List Bullet",
        "Caption",
        "Header",
        "Footer",
        "Page Number",
        "Table Grid",
        "Title",
        "Subtitle",
    ];
    for (i, style) in styles.iter().enumerate() {
        put_u16(&mut out, (i as u16) << 4 | 1);
        put_u16(&mut out, 0x0fff);
        put_u16(&mut out, style.len() as u16);
        put_utf16(&mut out, style);
        put_u16(&mut out, 0);
        out.extend_from_slice(&[0x00, 0x02, 0x00, 0x00, 0x6f, 0x02]);
    }
    for font in [
        "Times New Roman",
        "Symbol",
        "Arial",
        "Courier New",
        "Tahoma",
        "Calibri",
        "Wingdings",
    ] {
        out.push((font.len() * 2 + 40) as u8);
        out.extend_from_slice(&[0x26, 0x90, 0x01, 0x00, 0x00, 0x00]);
        out.extend_from_slice(&[0u8; 10]);
        out.extend_from_slice(&[0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00]);
        put_utf16(&mut out, font);
        put_u16(&mut out, 0);
    }
    out.resize(out.len().div_ceil(SECTOR) * SECTOR, 0);
    // Property runs: bold, italic, sizes, fonts, colours, spacing.
    let palette: Vec<Vec<u8>> = (0..24)
        .map(|_| {
            let n = rng.range(3, 18) as usize;
            let mut run = vec![n as u8];
            for _ in 0..n {
                run.push([0x08, 0x35, 0x36, 0x43, 0x4a, 0x4f, 0x61, 0x2a][rng.below(8) as usize]);
            }
            run
        })
        .collect();
    let mut fc: u32 = 0x600;
    while out.len() < len {
        let mut page = vec![0u8; SECTOR];
        let runs = rng.range(8, 30) as usize;
        let mut pos = 0;
        for _ in 0..=runs {
            page[pos..pos + 4].copy_from_slice(&fc.to_le_bytes());
            pos += 4;
            fc += rng.range(20, 600) as u32;
        }
        let mut tail = SECTOR - 1;
        for r in 0..runs {
            let run = &palette[rng.zipf(palette.len())];
            if tail < run.len() + pos + runs + 1 {
                break;
            }
            tail -= run.len();
            tail -= tail % 2;
            page[tail..tail + run.len()].copy_from_slice(run);
            page[pos + r] = (tail / 2) as u8;
        }
        page[SECTOR - 1] = runs as u8;
        out.extend(page);
    }
    fit(out, len)
}

/// The start of Word's main stream: the file information block, a long
/// run of offset/length pairs, mostly zero.
fn word_fib(rng: &mut Rng) -> Vec<u8> {
    let mut out = Vec::with_capacity(1472);
    put_u16(&mut out, 0xa5ec);
    put_u16(&mut out, 0x00c1);
    put_u16(&mut out, 0x4009);
    put_u16(&mut out, 0x0409);
    out.extend_from_slice(&[0u8; 28]);
    let mut offset = 0x600u32;
    while out.len() < 1472 {
        if rng.chance(0.4) {
            let length = rng.range(8, 4000) as u32;
            put_u32(&mut out, offset);
            put_u32(&mut out, length);
            offset += length;
        } else {
            put_u32(&mut out, offset);
            put_u32(&mut out, 0);
        }
    }
    fit(out, 1472)
}

/// A Word 97-2003 document of exactly `size` bytes.
pub fn word(rng: &mut Rng, size: usize) -> Vec<u8> {
    let cap = capacity(size, 5);
    // Pictures: none in some documents, a third of the bytes in others.
    let picture_share = rng.range(0, 35) as f64 / 100.0;
    let table_len = sectors_floor(cap / 7).max(SECTOR);
    let summary_len = SECTOR * 2;
    let doc_summary_len = SECTOR * 2;
    let picture_len = sectors_floor((cap as f64 * picture_share) as usize);
    let main_len = cap.saturating_sub(table_len + summary_len + doc_summary_len + picture_len);
    let mut main = word_fib(rng);
    let text_len = main_len.saturating_sub(main.len());
    // Word keeps the text in 8-bit code page unless a character needs
    // Unicode; then the whole text is UTF-16.
    if rng.chance(0.4) {
        let narrow = text(rng, text_len.div_ceil(2));
        let mut wide = Vec::with_capacity(text_len + 1);
        for b in narrow {
            put_u16(&mut wide, u16::from(b));
        }
        main.extend(fit(wide, text_len));
    } else {
        main.extend(text(rng, text_len));
    }
    let title = format!(
        "{} {} {}",
        capitalized(WORDS[rng.zipf(WORDS.len())]),
        WORDS[rng.zipf(WORDS.len())],
        PLACES[rng.zipf(PLACES.len())]
    );
    let streams = vec![
        Stream {
            name: "WordDocument",
            data: main,
        },
        Stream {
            name: "1Table",
            data: word_table(rng, table_len),
        },
        Stream {
            name: "Data",
            data: pictures(rng, picture_len, 20_000, 180_000),
        },
        Stream {
            name: "\u{5}SummaryInformation",
            data: summary(rng, summary_len, &title),
        },
        Stream {
            name: "\u{5}DocumentSummaryInformation",
            data: summary(rng, doc_summary_len, &title),
        },
    ];
    compound(size, streams)
}

fn biff(out: &mut Vec<u8>, kind: u16, body: &[u8]) {
    put_u16(out, kind);
    put_u16(out, body.len() as u16);
    out.extend_from_slice(body);
}

/// An RK number as Excel stores small integers: the value shifted left by
/// two with the "integer" bit set.
fn rk_integer(v: u32) -> u32 {
    (v << 2) | 2
}

/// Excel's workbook globals: fonts, formats, cell styles, sheet list.
fn excel_globals(rng: &mut Rng, out: &mut Vec<u8>) {
    biff(
        out,
        0x0809,
        &[
            0x00, 0x06, 0x05, 0x00, 0xaf, 0x18, 0xcd, 0x07, 0xc9, 0x80, 0, 0, 0x06, 0x03, 0, 0,
        ],
    );
    for font in ["Arial", "Arial", "Arial", "Arial", "Calibri", "Tahoma"] {
        let mut body = vec![
            0xc8, 0x00, 0x00, 0x00, 0xff, 0x7f, 0x90, 0x01, 0, 0, 0, 0, 0, 0,
        ];
        body.push(font.len() as u8);
        body.push(0);
        body.extend(font.bytes());
        biff(out, 0x0031, &body);
    }
    for format in [
        "#,##0",
        "#,##0.00",
        "0%",
        "0.00%",
        "dd/mm/yyyy",
        "\"$\"#,##0.00",
    ] {
        let mut body = vec![0xa4 + rng.below(8) as u8, 0x00];
        put_u16(&mut body, format.len() as u16);
        body.push(0);
        body.extend(format.bytes());
        biff(out, 0x041e, &body);
    }
    for i in 0..60u16 {
        let mut body = Vec::with_capacity(20);
        put_u16(&mut body, i % 6);
        put_u16(&mut body, [0, 3, 4, 9, 10, 14, 0xa4][usize::from(i % 7)]);
        put_u16(&mut body, if i < 16 { 0xfff5 } else { 0x0001 });
        body.extend_from_slice(&[0x20, 0x00, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0xc0, 0x20]);
        biff(out, 0x00e0, &body);
    }
    for sheet in ["Sales", "Forecast", "Regions"] {
        let mut body = vec![0, 0, 0, 0, 0, 0];
        body.push(sheet.len() as u8);
        body.push(0);
        body.extend(sheet.bytes());
        biff(out, 0x0085, &body);
    }
}

/// Labels of a spreadsheet's shared string table: customers, products,
/// regions, statuses, months.
fn excel_labels(rng: &mut Rng, count: usize) -> Vec<String> {
    let mut labels: Vec<String> = vec![
        "Customer".into(),
        "Product".into(),
        "Date".into(),
        "Quantity".into(),
        "Unit price".into(),
        "Amount".into(),
        "Discount".into(),
        "Net".into(),
        "Region".into(),
        "Status".into(),
        "Open".into(),
        "Closed".into(),
        "Pending".into(),
        "North".into(),
        "South".into(),
        "East".into(),
        "West".into(),
    ];
    while labels.len() < count {
        let label = match rng.below(3) {
            0 => format!(
                "{} {} Ltd",
                NAMES[rng.zipf(NAMES.len())],
                PLACES[rng.zipf(PLACES.len())]
            ),
            1 => format!(
                "{} {}-{:04}",
                capitalized(WORDS[rng.zipf(WORDS.len())]),
                ["A", "B", "C", "X", "Pro", "Lite"][rng.below(6) as usize],
                rng.below(10_000)
            ),
            _ => format!("INV-{:06}", rng.below(1_000_000)),
        };
        labels.push(label);
    }
    labels
}

/// What every row of a worksheet refers to.
#[derive(Clone, Copy)]
struct Sheet<'a> {
    /// Labels of customers in the shared strings (after the 17 fixed ones).
    customers: usize,
    /// Index of the first comment in the shared strings.
    comments_from: usize,
    /// Comments in the shared strings.
    comments: usize,
    /// List price of each product.
    prices: &'a [f64],
}

/// One worksheet row `r` of an Excel workbook: the ROW record and its
/// cells.
fn excel_row(rng: &mut Rng, book: &mut Vec<u8>, r: u16, sheet: Sheet<'_>) {
    let Sheet {
        customers,
        comments_from,
        comments,
        prices,
    } = sheet;
    let mut body = Vec::with_capacity(16);
    put_u16(&mut body, r);
    body.extend_from_slice(&[0, 0, 10, 0, 0xff, 0x00, 0, 0, 0, 0, 0x00, 0x01, 0x0f, 0x00]);
    biff(book, 0x0208, &body);
    let cell = |col: u16, xf: u16| {
        let mut c = Vec::with_capacity(16);
        put_u16(&mut c, r);
        put_u16(&mut c, col);
        put_u16(&mut c, xf);
        c
    };
    // Customer and product labels.
    let mut c = cell(0, 16);
    put_u32(&mut c, (17 + rng.zipf(customers.max(1))) as u32);
    biff(book, 0x00fd, &c);
    let product = rng.zipf(prices.len());
    let mut c = cell(1, 16);
    put_u32(&mut c, (17 + (product * 7) % customers.max(1)) as u32);
    biff(book, 0x00fd, &c);
    // Date (serial day in 2009), quantity.
    let mut c = cell(2, 21);
    put_u32(&mut c, rk_integer(39_814 + u32::from(r) / 25));
    biff(book, 0x027e, &c);
    let quantity = rng.range(1, 500);
    let mut c = cell(3, 17);
    put_u32(&mut c, rk_integer(quantity as u32));
    biff(book, 0x027e, &c);
    // Unit price from the list, amount as a formula (D*E).
    let price = prices[product];
    let mut c = cell(4, 18);
    put_f64(&mut c, price);
    biff(book, 0x0203, &c);
    let amount = price * quantity as f64;
    let mut c = cell(5, 18);
    put_f64(&mut c, amount);
    c.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
    put_u16(&mut c, 11);
    c.extend_from_slice(&[0x44]);
    put_u16(&mut c, r);
    c.extend_from_slice(&[0x03, 0xc0, 0x44]);
    put_u16(&mut c, r);
    c.extend_from_slice(&[0x04, 0xc0, 0x05]);
    biff(book, 0x0006, &c);
    // Discount and net (a formula), region and status labels.
    let discount = [0.0, 0.0, 0.05, 0.1, 0.15][rng.below(5) as usize];
    let mut c = cell(6, 19);
    put_f64(&mut c, discount);
    biff(book, 0x0203, &c);
    let mut c = cell(7, 18);
    put_f64(&mut c, amount * (1.0 - discount));
    c.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
    put_u16(&mut c, 15);
    c.extend_from_slice(&[0x44]);
    put_u16(&mut c, r);
    c.extend_from_slice(&[0x05, 0xc0, 0x1e, 0x01, 0x00, 0x44]);
    put_u16(&mut c, r);
    c.extend_from_slice(&[0x06, 0xc0, 0x04, 0x05]);
    biff(book, 0x0006, &c);
    let mut c = cell(8, 16);
    put_u32(&mut c, 13 + rng.below(4) as u32);
    biff(book, 0x00fd, &c);
    let mut c = cell(9, 16);
    put_u32(&mut c, 10 + rng.zipf(3) as u32);
    biff(book, 0x00fd, &c);
    if rng.chance(0.3) {
        let mut c = cell(10, 16);
        put_u32(&mut c, (comments_from + rng.zipf(comments)) as u32);
        biff(book, 0x00fd, &c);
    }
    // Formatted but empty cells to the right (MULBLANK), as sheets
    // formatted by whole rows or columns carry.
    let mut c = cell(11, 15);
    c.truncate(4);
    for _ in 11..24 {
        put_u16(&mut c, 15);
    }
    put_u16(&mut c, 23);
    biff(book, 0x00be, &c);
}

/// An Excel 97-2003 workbook of exactly `size` bytes.
pub fn excel(rng: &mut Rng, size: usize) -> Vec<u8> {
    let cap = capacity(size, 3);
    let picture_share = rng.range(0, 8) as f64 / 100.0;
    let picture_len = sectors_floor((cap as f64 * picture_share) as usize);
    let summary_len = SECTOR * 2;
    let book_len = cap.saturating_sub(picture_len + summary_len);
    let mut book = Vec::with_capacity(book_len + 4096);
    excel_globals(rng, &mut book);
    // Shared strings, split into CONTINUE records as Excel does.
    let mut labels = excel_labels(rng, 120 + size / 6000);
    // Free-text comments, some rows have one.
    let comments_from = labels.len();
    for _ in 0..40 + size / 20_000 {
        let mut s = Vec::new();
        sentence(rng, &mut s);
        labels.push(String::from_utf8_lossy(&s).into_owned());
    }
    let mut sst = Vec::new();
    put_u32(&mut sst, (labels.len() * 6) as u32);
    put_u32(&mut sst, labels.len() as u32);
    for label in &labels {
        put_u16(&mut sst, label.len() as u16);
        sst.push(0);
        sst.extend(label.bytes());
    }
    for (i, part) in sst.chunks(8224).enumerate() {
        biff(&mut book, if i == 0 { 0x00fc } else { 0x003c }, part);
    }
    let customers = comments_from.saturating_sub(17);
    let comments = labels.len() - comments_from;
    // Each product has its list price: whole amounts mostly, some cents.
    let prices: Vec<f64> = (0..64)
        .map(|_| {
            if rng.chance(0.6) {
                rng.range(1, 2500) as f64
            } else {
                rng.range(99, 250_000) as f64 / 100.0
            }
        })
        .collect();
    let mut row: u16 = 1;
    while book.len() < book_len {
        excel_row(
            rng,
            &mut book,
            row,
            Sheet {
                customers,
                comments_from,
                comments,
                prices: &prices,
            },
        );
        if row.is_multiple_of(32) {
            // DBCELL: offsets of the last 32 rows.
            let mut c = Vec::with_capacity(70);
            put_u32(&mut c, 32 * 120);
            for i in 0..32u16 {
                put_u16(&mut c, 20 + i * 2);
            }
            biff(&mut book, 0x00d7, &c);
        }
        row = row.wrapping_add(1);
        if row == 0 {
            // Next sheet.
            biff(&mut book, 0x000a, &[]);
            biff(&mut book, 0x0809, &[0x00, 0x06, 0x10, 0x00, 0, 0, 0, 0]);
            row = 1;
        }
    }
    let book = fit(book, book_len);
    let title = format!(
        "{} {} {}",
        capitalized(WORDS[rng.zipf(WORDS.len())]),
        "figures",
        rng.range(2005, 2009)
    );
    let streams = vec![
        Stream {
            name: "Workbook",
            data: book,
        },
        Stream {
            name: "MsoDrawingGroup",
            data: pictures(rng, picture_len, 10_000, 60_000),
        },
        Stream {
            name: "\u{5}SummaryInformation",
            data: summary(rng, summary_len, &title),
        },
    ];
    compound(size, streams)
}

/// PowerPoint's document stream: slides with shapes and UTF-16 text;
/// exactly `len` bytes.
fn slides(rng: &mut Rng, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 4096);
    // Shape properties barely change from shape to shape.
    let shape_template: Vec<u8> = (0..160).map(|i| (i * 7 % 23) as u8).collect();
    let mut slide_id: u32 = 256;
    while out.len() < len {
        let mut slide = Vec::with_capacity(4096);
        put_u32(&mut slide, slide_id);
        slide.extend_from_slice(&[0u8; 20]);
        slide_id += 1;
        let shapes = rng.range(2, 6);
        for s in 0..shapes {
            put_u16(&mut slide, 0x000f);
            put_u16(&mut slide, 0xf004);
            put_u32(&mut slide, shape_template.len() as u32 + 16);
            slide.extend_from_slice(&shape_template);
            for _ in 0..4 {
                put_u32(&mut slide, rng.range(0, 5760) as u32 & !0x1f);
            }
            // Title or bullets in UTF-16.
            let mut words = Vec::new();
            if s == 0 {
                sentence(rng, &mut words);
            } else {
                for _ in 0..rng.range(2, 6) {
                    sentence(rng, &mut words);
                    words.push(b'\r');
                }
            }
            put_u16(&mut slide, 0x0000);
            put_u16(&mut slide, 0x0fa0);
            put_u32(&mut slide, (words.len() * 2) as u32);
            for b in words {
                put_u16(&mut slide, u16::from(b));
            }
            // Style runs.
            put_u16(&mut slide, 0x0000);
            put_u16(&mut slide, 0x0fa1);
            put_u32(&mut slide, 18);
            slide.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0x01, 0, 0, 0, 0, 0x03, 0, 0, 0, 0, 0, 0]);
        }
        put_u16(&mut out, 0x000f);
        put_u16(&mut out, 0x03ee);
        put_u32(&mut out, slide.len() as u32);
        out.extend(slide);
    }
    fit(out, len)
}

/// A PowerPoint 97-2003 presentation of exactly `size` bytes.
pub fn powerpoint(rng: &mut Rng, size: usize) -> Vec<u8> {
    let cap = capacity(size, 4);
    let picture_share = rng.range(55, 85) as f64 / 100.0;
    let picture_len = sectors_floor((cap as f64 * picture_share) as usize);
    let summary_len = SECTOR * 2;
    let user_len = SECTOR;
    let doc_len = cap.saturating_sub(picture_len + summary_len + user_len);
    let mut user = Vec::with_capacity(user_len);
    put_u32(&mut user, 0x0ff6_0000);
    put_u32(&mut user, 20);
    put_u32(&mut user, 0xe391_c05f);
    let author = NAMES[rng.zipf(NAMES.len())];
    user.extend(author.bytes());
    let title = format!(
        "{} {}",
        capitalized(WORDS[rng.zipf(WORDS.len())]),
        WORDS[rng.zipf(WORDS.len())]
    );
    let streams = vec![
        Stream {
            name: "PowerPoint Document",
            data: slides(rng, doc_len),
        },
        Stream {
            name: "Pictures",
            data: pictures(rng, picture_len, 15_000, 250_000),
        },
        Stream {
            name: "Current User",
            data: fit(user, user_len),
        },
        Stream {
            name: "\u{5}SummaryInformation",
            data: summary(rng, summary_len, &title),
        },
    ];
    compound(size, streams)
}

/// A zip archive of exactly `size` bytes whose entries are deflated (here:
/// random) data: a WAN optimizer's compression finds nothing in it.
pub fn zip(rng: &mut Rng, size: usize) -> Vec<u8> {
    let entries = 12usize;
    let names: Vec<String> = (0..entries)
        .map(|i| {
            format!(
                "{}/{}-{}-{}.{}",
                ["reports", "slides", "sheets"][i % 3],
                WORDS[rng.zipf(WORDS.len())],
                PLACES[rng.zipf(PLACES.len())],
                2005 + i,
                ["doc", "ppt", "xls"][i % 3]
            )
        })
        .collect();
    let overhead: usize = names.iter().map(|n| 30 + 46 + 2 * n.len()).sum::<usize>() + 22;
    let data_total = size.saturating_sub(overhead);
    // Random entry sizes that add up to data_total.
    let weights: Vec<u64> = (0..entries).map(|_| rng.range(1, 100)).collect();
    let weight_sum: u64 = weights.iter().sum();
    let mut sizes: Vec<usize> = weights
        .iter()
        .map(|w| (data_total as u128 * u128::from(*w) / u128::from(weight_sum)) as usize)
        .collect();
    let assigned: usize = sizes.iter().sum();
    if let Some(last) = sizes.last_mut() {
        *last += data_total - assigned;
    }
    let mut out = Vec::with_capacity(size);
    let mut central = Vec::new();
    for (name, len) in names.iter().zip(&sizes) {
        let offset = out.len() as u32;
        let crc = rng.next_u64() as u32;
        let stamp = [0x4a, 0x6b, 0x7a, 0x3a];
        out.extend_from_slice(b"PK\x03\x04");
        put_u16(&mut out, 20);
        put_u16(&mut out, 0);
        put_u16(&mut out, 8);
        out.extend_from_slice(&stamp);
        put_u32(&mut out, crc);
        put_u32(&mut out, *len as u32);
        put_u32(&mut out, (*len as u64 * 3) as u32);
        put_u16(&mut out, name.len() as u16);
        put_u16(&mut out, 0);
        out.extend(name.bytes());
        let start = out.len();
        out.resize(start + len, 0);
        if let Some(body) = out.get_mut(start..) {
            rng.fill(body);
        }
        central.extend_from_slice(b"PK\x01\x02");
        put_u16(&mut central, 20);
        put_u16(&mut central, 20);
        put_u16(&mut central, 0);
        put_u16(&mut central, 8);
        central.extend_from_slice(&stamp);
        put_u32(&mut central, crc);
        put_u32(&mut central, *len as u32);
        put_u32(&mut central, (*len as u64 * 3) as u32);
        put_u16(&mut central, name.len() as u16);
        central.extend_from_slice(&[0u8; 12]);
        put_u32(&mut central, offset);
        central.extend(name.bytes());
    }
    let central_offset = out.len() as u32;
    let central_len = central.len() as u32;
    out.extend(central);
    out.extend_from_slice(b"PK\x05\x06");
    put_u32(&mut out, 0);
    put_u16(&mut out, entries as u16);
    put_u16(&mut out, entries as u16);
    put_u32(&mut out, central_len);
    put_u32(&mut out, central_offset);
    put_u16(&mut out, 0);
    fit(out, size)
}
